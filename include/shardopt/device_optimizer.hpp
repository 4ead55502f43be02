// DeviceOptimizer: a base optimizer whose parameters, fp32 master weights and optimizer state
// live in CUDA device memory. step() only enqueues work on the caller's stream and returns at
// once: gradient unscaling, the finite check, the global gradient norm (for clipping), the
// skip decision, the step counter and the dynamic loss scale are all computed and read on the
// device, so the host never waits for the GPU inside a training step.
//
// The update rules, their options and defaults are those of shardopt::Optimizer (torch.optim
// semantics, steps counted from 1 and only when an update is applied). Precision:
//   dtype f32         parameters and gradients f32; the parameters are the master weights.
//   dtype bf16 / f16  parameters and gradients in that type (what the model computes with);
//                     the optimizer keeps fp32 master weights and fp32 state, updates the master
//                     and writes the rounded result back into the parameters.
//
// A step, all on the stream given to step(), in launches that each cover every tensor:
//   1. (when a norm is needed) sum of squares of every gradient: norm and finite check at once
//   2. one thread decides: skip (non-finite, when skip_nonfinite), the clip coefficient
//      min(1, max_grad_norm / (norm + 1e-6)), the step number and the rule's scalars, and the
//      next loss scale (torch.cuda.amp.GradScaler: backoff on overflow, growth every
//      growth_interval good steps)
//   3. the update (LAMB: moments and per-tensor norms, trust ratios, then the parameters),
//      which reads the gradient as grad * (1 / loss_scale) * clip and does nothing on a skip.
//
// One thread drives an optimizer at a time (like shardopt::Optimizer). Built without CUDA, or
// with no usable device, create() throws Error(unsupported).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "shardopt/optim.hpp"
#include "shardopt/types.hpp"

// cudaStream_t is `CUstream_st *`: declaring the struct lets callers pass their cudaStream_t
// (or nullptr for the legacy default stream) without this header needing CUDA's.
struct CUstream_st;

namespace shardopt::cuda {

using Stream = CUstream_st *;

// CUDA devices usable by this process; 0 when built without CUDA, with no driver or no GPU.
int device_count() noexcept;

enum class LossScaling : int32_t {
    automatic = 0, // dynamic for f16 parameters, none otherwise
    none = 1,      // gradients are used as given (scale 1)
    dynamic = 2,   // torch.cuda.amp.GradScaler's dynamic scale
};

// torch.cuda.amp.GradScaler's defaults.
struct LossScalerOptions {
    LossScaling mode = LossScaling::automatic;
    double init_scale = 65536.0;
    double growth_factor = 2.0;
    double backoff_factor = 0.5;
    int growth_interval = 2000;
};

struct DeviceOptimizerOptions {
    OptimizerOptions optimizer;
    DType dtype = DType::f32; // f32, or bf16 / f16 with fp32 master weights
    // Clip the global gradient norm (over every tensor of this optimizer) to this; 0 = off.
    double max_grad_norm = 0.0;
    // Skip the whole update when any gradient is NaN/Inf: parameters, state and step count are
    // left as they were. Required by dynamic loss scaling. Costs one read of the gradients.
    bool skip_nonfinite = true;
    LossScalerOptions loss_scaling;
    int device = -1; // CUDA device ordinal; -1 = the calling thread's current device
};

// A caller-owned device tensor: `count` elements of the optimizer's dtype at `param`. Any start
// address aligned to the element size works; 16-byte aligned starts get vector loads.
struct DeviceTensor {
    void *param = nullptr;
    std::size_t count = 0;
};

// Read back from the device (synchronizing; for logging and checkpoints, not every step).
struct StepInfo {
    int64_t steps = 0;         // updates applied (skipped steps do not count)
    int64_t skipped_steps = 0; // steps skipped for a non-finite gradient
    bool last_skipped = false;
    // Global norm of the last step's unscaled gradients before clipping; 0 when no norm is
    // computed (no clipping, no finite check and no loss scaling).
    double last_grad_norm = 0.0;
    // What the last step multiplied every gradient by: 1 / loss_scale * clip coefficient.
    float last_grad_scale = 1.0f;
    float loss_scale = 1.0f; // the scale to apply to the next loss (1 without loss scaling)
    int32_t growth_tracker = 0; // consecutive good steps since the scale last changed
};

class DeviceOptimizer {
  public:
    // Allocates master weights (bf16/f16) and state on the device and initializes them from
    // `params`, which must be device (or managed) memory of options.device. The initialization
    // is ordered after the work already on `stream`, and create() waits for it.
    static std::unique_ptr<DeviceOptimizer> create(const std::vector<DeviceTensor> &params,
                                                   const DeviceOptimizerOptions &options, Stream stream = nullptr);
    virtual ~DeviceOptimizer() = default;
    DeviceOptimizer(const DeviceOptimizer &) = delete;
    DeviceOptimizer &operator=(const DeviceOptimizer &) = delete;

    // Enqueues one optimizer step on `stream` and returns without waiting for the device.
    // grads[i] is tensor i's gradient on the device (count elements of the optimizer's dtype;
    // with loss scaling, of the scaled loss). The gradients are only read, and must stay valid
    // until the step has run on the stream. Successive steps must be ordered on the device
    // (the same stream, or streams the caller orders with events).
    virtual void step(const void *const *grads, std::size_t grad_count, Stream stream) = 0;
    void step(const std::vector<const void *> &grads, Stream stream) { step(grads.data(), grads.size(), stream); }

    // Learning-rate schedules: takes effect from the next step() enqueued.
    virtual void set_lr(double lr) = 0;

    virtual const DeviceOptimizerOptions &options() const noexcept = 0;
    virtual int tensor_count() const noexcept = 0;
    virtual std::size_t tensor_size(int tensor) const = 0;
    // State arrays per element, in shardopt::Optimizer's slot order (Adam: m, v[, v_max]).
    virtual int state_slots() const noexcept = 0;
    // The device's current loss scale (one float): multiply the loss by it on the device
    // before backward, without reading it on the host.
    virtual const float *device_loss_scale() const noexcept = 0;

    // --- synchronizing: wait for the stream of the last step (or of create), then copy ---
    virtual StepInfo step_info() = 0;
    // fp32 master weights (the parameters themselves for f32) and state slots of one tensor,
    // tensor_size(tensor) floats each.
    virtual void read_master(int tensor, float *host) = 0;
    virtual void read_state(int tensor, int slot, float *host) = 0;
    // Restore (checkpoints): write_master also rewrites the bf16/f16 parameters from it.
    virtual void write_master(int tensor, const float *host) = 0;
    virtual void write_state(int tensor, int slot, const float *host) = 0;
    virtual void set_step_count(int64_t steps) = 0;
    virtual void set_loss_scale(double scale) = 0;

  protected:
    DeviceOptimizer() = default;
};

} // namespace shardopt::cuda

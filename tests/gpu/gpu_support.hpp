// What the GPU tests share: device memory for test data, ulp distances, and Lockstep, which
// runs a DeviceOptimizer and the CPU reference (shardopt::Optimizer over host buffers) side by
// side and compares them after every step.
//
// Lockstep's host side is what the GPU tests spend their time on (the device work of a step is
// microseconds), so it keeps every host array for the life of a Lockstep (page-locked, reused
// across Locksteps), reads the device into them in as few copies as DeviceOptimizer allows,
// and spreads gradient generation, the reference update and the comparison over the hardware
// threads. Every result is independent of the thread count: gradients come from a
// counter-based generator (a value depends only on the seed, the step and its index), the
// reference update is element-wise (LAMB's per-tensor sums stay whole-tensor loops), and the
// comparison reduces with max.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "shardopt/device_optimizer.hpp"
#include "shardopt/optim.hpp"

namespace gpu_test {

using namespace shardopt;

// Fails the calling test (with CUDA's error string) when a CUDA call of the test itself fails.
void cuda_ok(cudaError_t status, const char *what);

// Device memory owned by a test.
class DeviceMemory {
  public:
    explicit DeviceMemory(std::size_t bytes);
    ~DeviceMemory();
    DeviceMemory(const DeviceMemory &) = delete;
    DeviceMemory &operator=(const DeviceMemory &) = delete;
    char *get() const { return static_cast<char *>(ptr_); }

  private:
    void *ptr_ = nullptr;
};

// Page-locked host memory (full-speed, truly asynchronous copies). Pinning is slow, so freed
// buffers go back to a process-wide cache that later ones are taken from; the contents of a
// new PinnedMemory are unspecified.
class PinnedMemory {
  public:
    PinnedMemory() = default;
    explicit PinnedMemory(std::size_t bytes);
    ~PinnedMemory();
    PinnedMemory(PinnedMemory &&other) noexcept;
    PinnedMemory &operator=(PinnedMemory &&other) noexcept;
    PinnedMemory(const PinnedMemory &) = delete;
    PinnedMemory &operator=(const PinnedMemory &) = delete;
    char *get() const { return static_cast<char *>(ptr_); }
    template <typename T> T *as() const { return static_cast<T *>(ptr_); }

  private:
    void release() noexcept;
    void *ptr_ = nullptr;
    std::size_t capacity_ = 0; // of the cached block (at least the bytes asked for)
};

// Runs fn(task) for every task in [0, tasks) over the hardware threads (the caller's among
// them) and returns when all have run; the first exception thrown is rethrown here. fn must
// not use Boost.Test's macros (they are not thread-safe).
void parallel_for(std::size_t tasks, const std::function<void(std::size_t)> &fn);

// Deterministic standard normal values, counter-based: value `index` of the stream `key`
// depends on nothing else (not on the order or the thread that asks). The inverse normal
// CDF, tabulated at 65537 quantiles and interpolated linearly (so |value| < 4.33).
float standard_normal(uint64_t key, uint64_t index);
// A stream key from a seed and a stream number (one stream per step).
uint64_t stream_key(uint64_t seed, uint64_t stream);

// Distance in units in the last place (0 for equal values and for two NaNs).
int64_t ulp_distance(float a, float b);
int64_t ulp_distance_16(uint16_t a, uint16_t b, bool bf16); // between two bf16 or two f16 bit patterns

// float -> the dtype's storage bits (round to nearest even) and back; f32 keeps the float bits.
uint32_t to_bits(float value, DType dtype);
float from_bits(uint32_t bits, DType dtype);

// Tensors laid out back to back in one flat buffer for parameters and one for gradients, each
// starting `shift` elements into its buffer: starts land on every alignment, and a gradient
// shift different from the parameter shift puts gradient and parameter out of step.
struct Layout {
    std::vector<std::size_t> sizes;
    std::size_t param_shift = 0;
    std::size_t grad_shift = 0;
};

// How the gradients of one step are made.
struct GradSpec {
    float stddev = 1e-2f;
    // Put this value into one element (a NaN or Inf to test the skip), at (tensor, index).
    bool poison = false;
    float poison_value = 0.0f;
    std::size_t poison_tensor = 0, poison_index = 0;
};

// What one lockstep step found.
struct StepCheck {
    bool skipped = false;
    int64_t master_ulp = 0; // largest distance of the fp32 master weights (the f32 parameters)
    int64_t state_ulp = 0;  // largest distance over every state slot
    int64_t param_ulp = 0;  // bf16/f16 parameters, in the dtype's ulp (0 for f32)
    bool unchanged = true;  // parameters, master and state bitwise as before the step
    cuda::StepInfo info;
};

class Lockstep {
  public:
    Lockstep(const cuda::DeviceOptimizerOptions &options, const Layout &layout, uint32_t seed);
    ~Lockstep();
    Lockstep(const Lockstep &) = delete;
    Lockstep &operator=(const Lockstep &) = delete;

    // Makes gradients (of the scaled loss when the optimizer scales it), steps the GPU on the
    // stream, steps the CPU reference from the GPU's previous state with the gradient scale the
    // device chose, and compares. Afterwards the reference takes the GPU's values again, so
    // every step is checked on its own (rounding differences do not accumulate).
    StepCheck step(const GradSpec &spec = {});
    void set_lr(double lr);
    // Takes the device's values as the reference's again (after writing state directly).
    void resync() { read_device(previous_); }

    cuda::DeviceOptimizer &optimizer() { return *optimizer_; }
    cudaStream_t stream() const { return stream_; }
    // The gradient of the last step as uploaded (of the scaled loss when the optimizer scales
    // it), before the device's unscaling and clipping: every tensor's elements back to back,
    // tensor t from tensor_offset(t).
    const std::vector<float> &last_grads() const { return grads_; }
    std::size_t tensor_offset(std::size_t tensor) const { return offsets_.at(tensor); }
    std::vector<const void *> grad_pointers() const;

  private:
    // The device's values as the host holds them: the parameter buffer as on the device (shift
    // included), and every tensor's fp32 master weights and state slots back to back (slot k
    // of tensor t at k * elements_ + offsets_[t]).
    struct HostValues {
        PinnedMemory params;
        PinnedMemory master; // bf16/f16 only: for f32 the master weights are the parameters
        PinnedMemory state;
    };
    float *master_of(const HostValues &values) const;
    float *state_of(const HostValues &values, int slot) const;
    void read_device(HostValues &values);
    void make_grads(const GradSpec &spec, float loss_scale);
    void reference_step(int64_t step, float grad_scale);
    void compare(StepCheck &check) const;

    cuda::DeviceOptimizerOptions options_;
    Layout layout_;
    uint32_t seed_;
    uint64_t steps_made_ = 0; // gradient streams used (one per step, skipped ones included)
    std::size_t elem_;
    int slots_ = 0;
    std::size_t elements_ = 0;                   // every tensor's elements
    std::size_t param_total_ = 0, grad_total_ = 0; // the flat buffers' elements, shift included
    std::vector<std::size_t> offsets_;           // tensor t's first element in the host arrays
    std::unique_ptr<DeviceMemory> params_, grads_device_;
    cudaStream_t stream_ = nullptr;
    std::unique_ptr<cuda::DeviceOptimizer> optimizer_;
    std::unique_ptr<Optimizer> reference_;
    // The device's values after the last step (what the reference starts the next step from,
    // and updates in place), and the ones read after this step; swapped after each step.
    HostValues previous_, current_;
    PinnedMemory grad_upload_;    // the gradient buffer as uploaded, in the dtype, shift included
    std::vector<float> grads_;    // the uploaded gradients as floats (still loss-scaled)
    std::vector<float> scaled_;   // grads_ * the device's gradient scale: the reference's input
    std::vector<double> stats_;   // LAMB's per-tensor statistics
};

} // namespace gpu_test

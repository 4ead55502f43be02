// What the GPU tests share: device memory for test data, ulp distances, and Lockstep, which
// runs a DeviceOptimizer and the CPU reference (shardopt::Optimizer over host buffers) side by
// side and compares them after every step.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "shardopt/cuda_optimizer.hpp"
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

    // Makes gradients (of the scaled loss when the optimizer scales it), steps the GPU on the
    // stream, steps the CPU reference from the GPU's previous state with the gradient scale the
    // device chose, and compares. Afterwards the reference takes the GPU's values again, so
    // every step is checked on its own (rounding differences do not accumulate).
    StepCheck step(const GradSpec &spec = {});
    void set_lr(double lr);
    // Takes the device's values as the reference's again (after writing state directly).
    void resync() { read_device(master_, state_, param_bits_); }

    cuda::DeviceOptimizer &optimizer() { return *optimizer_; }
    cudaStream_t stream() const { return stream_; }
    // The unscaled gradient of the last step, as the reference used it before clipping.
    const std::vector<std::vector<float>> &last_grads() const { return grads_; }
    std::vector<const void *> grad_pointers() const;

  private:
    void upload_grads();
    void read_device(std::vector<std::vector<float>> &master, std::vector<std::vector<std::vector<float>>> &state,
                     std::vector<std::vector<uint32_t>> &params);

    cuda::DeviceOptimizerOptions options_;
    Layout layout_;
    std::mt19937 rng_;
    std::size_t elem_;
    std::vector<std::size_t> param_offsets_, grad_offsets_;
    std::unique_ptr<DeviceMemory> params_, grads_device_;
    cudaStream_t stream_ = nullptr;
    std::unique_ptr<cuda::DeviceOptimizer> optimizer_;
    std::unique_ptr<Optimizer> reference_;
    // The device's values after the last step (what the reference starts the next step from).
    std::vector<std::vector<float>> master_;
    std::vector<std::vector<std::vector<float>>> state_;
    std::vector<std::vector<uint32_t>> param_bits_;
    std::vector<std::vector<uint32_t>> grad_bits_;  // what was uploaded, in the dtype
    std::vector<std::vector<float>> grads_;         // grad_bits_ as floats (still loss-scaled)
};

} // namespace gpu_test

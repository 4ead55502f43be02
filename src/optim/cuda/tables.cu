// Small kernels around the update: pointing the tensor table at this step's gradients, and
// the conversions and fills that initialize or restore master weights and state.
#include <algorithm>

#include "cuda/cuda_check.hpp"
#include "dtype_dispatch.cuh"
#include "launch.hpp"
#include "multi_tensor.cuh"
#include "kernel_launch.cuh"

namespace shardopt::cuda::detail {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096; // grid-stride beyond this: these kernels are not hot

int blocks_for(int64_t count) { return int(std::max<int64_t>(1, std::min(kMaxBlocks, (count + kThreads - 1) / kThreads))); }

// The pointers travel inside the launch's arguments: no host buffer has to outlive the call,
// and the table changes in stream order, after earlier steps have read it.
__global__ void set_grads_kernel(TensorEntry *tensors, GradPatch patch) {
    for (int i = int(threadIdx.x); i < patch.count; i += int(blockDim.x)) tensors[patch.first + i].grad = patch.grads[i];
}

template <class P> __global__ void master_from_params_kernel(float *master, const P *param, int64_t count) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x)
        master[i] = to_float(param[i]);
}

template <class P> __global__ void params_from_master_kernel(P *param, const float *master, int64_t count) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x)
        param[i] = from_float<P>(master[i]);
}

__global__ void fill_kernel(float *data, int64_t count, float value) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x)
        data[i] = value;
}

} // namespace

void launch_set_grads(TensorEntry *tensors, const GradPatch &patch, cudaStream_t stream) {
    SHARDOPT_LAUNCH(set_grads_kernel, 1, kThreads, 0, stream)(tensors, patch);
    check_launch("set_grads_kernel");
}

void launch_master_from_params(float *master, const void *param, int64_t count, DType dtype, cudaStream_t stream) {
    if (count == 0) return;
    with_param_type(dtype, [&](auto *tag) {
        using P = std::remove_pointer_t<decltype(tag)>;
        SHARDOPT_LAUNCH(master_from_params_kernel<P>, blocks_for(count), kThreads, 0, stream)(master, static_cast<const P *>(param), count);
    });
    check_launch("master_from_params_kernel");
}

void launch_params_from_master(void *param, const float *master, int64_t count, DType dtype, cudaStream_t stream) {
    if (count == 0) return;
    with_param_type(dtype, [&](auto *tag) {
        using P = std::remove_pointer_t<decltype(tag)>;
        SHARDOPT_LAUNCH(params_from_master_kernel<P>, blocks_for(count), kThreads, 0, stream)(static_cast<P *>(param), master, count);
    });
    check_launch("params_from_master_kernel");
}

void launch_fill(float *data, int64_t count, float value, cudaStream_t stream) {
    if (count == 0) return;
    SHARDOPT_LAUNCH(fill_kernel, blocks_for(count), kThreads, 0, stream)(data, count, value);
    check_launch("fill_kernel");
}

void preload_tables() {
    cudaFuncAttributes attributes{};
    check(cudaFuncGetAttributes(&attributes, set_grads_kernel), "loading set_grads_kernel");
}

} // namespace shardopt::cuda::detail

// The CUDA space's passes over gradient memory. Built like the optimizer's kernels (no FMA
// contraction, IEEE rounding, no flush to zero): each element sees the same operations, rounded
// the same way, as in the CPU passes of optim/vector_ops.cpp.
#include <algorithm>
#include <string>

#include "optim/cuda/block_reduce.cuh"
#include "cuda/cuda_check.hpp"
#include "shardopt/error.hpp"
#include "space_kernels.hpp"
#include "optim/cuda/kernel_launch.cuh"

namespace shardopt::engine::detail {
namespace {

using cuda::detail::check;
using cuda::detail::check_launch;

constexpr int kThreads = 256;
static_assert(kThreads == kSumsqThreads, "the host's copy of the sum-of-squares order (sumsq_order.hpp) assumes it");
constexpr int64_t kMaxBlocks = 4096; // grid-stride beyond this

int blocks_for(std::size_t count) {
    return int(std::max<int64_t>(1, std::min<int64_t>(kMaxBlocks, (int64_t(count) + kThreads - 1) / kThreads)));
}

template <class T> __global__ void add_into_kernel(T *dst, const T *src, int64_t count) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x)
        dst[i] += src[i];
}

template <class T> __global__ void scale_kernel(T *data, int64_t count, T factor) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x)
        data[i] *= factor;
}

// One block per chunk. Thread t sums elements t, t + kThreads, ... in order, then the block
// adds the threads' sums in a fixed tree: the order depends only on the chunk's length. NaN
// and Inf are not filtered: they reach the partial, and so the caller's sum.
template <class T>
__global__ void __launch_bounds__(kThreads) sumsq_partials_kernel(SumsqPatch patch, double *partials) {
    const T *data = static_cast<const T *>(patch.data[blockIdx.x]);
    const int n = patch.elements[blockIdx.x];
    double sum = 0.0;
#pragma unroll 4
    for (int i = int(threadIdx.x); i < n; i += kThreads) {
        const double x = double(data[i]);
        sum += x * x;
    }
    sum = cuda::detail::block_sum<kThreads>(sum);
    if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

} // namespace

void require_float(DType dtype) {
    require(dtype == DType::f32 || dtype == DType::f64, ErrorCode::invalid_argument,
            std::string("gradient dtype must be f32 or f64, got ") + dtype_name(dtype));
}

void launch_add_into(void *dst, const void *src, std::size_t count, DType dtype, cudaStream_t stream) {
    require_float(dtype);
    if (count == 0) return;
    if (dtype == DType::f32)
        SHARDOPT_LAUNCH(add_into_kernel<float>, blocks_for(count), kThreads, 0, stream)(
            static_cast<float *>(dst), static_cast<const float *>(src), int64_t(count));
    else
        SHARDOPT_LAUNCH(add_into_kernel<double>, blocks_for(count), kThreads, 0, stream)(
            static_cast<double *>(dst), static_cast<const double *>(src), int64_t(count));
    check_launch("add_into_kernel");
}

void launch_scale(void *data, std::size_t count, DType dtype, double factor, cudaStream_t stream) {
    require_float(dtype);
    if (count == 0) return;
    if (dtype == DType::f32)
        SHARDOPT_LAUNCH(scale_kernel<float>, blocks_for(count), kThreads, 0, stream)(static_cast<float *>(data), int64_t(count),
                                                                        float(factor));
    else
        SHARDOPT_LAUNCH(scale_kernel<double>, blocks_for(count), kThreads, 0, stream)(static_cast<double *>(data),
                                                                         int64_t(count), factor);
    check_launch("scale_kernel");
}

void launch_sumsq_partials(const SumsqPatch &patch, double *partials, DType dtype, cudaStream_t stream) {
    require_float(dtype);
    if (patch.count == 0) return;
    if (dtype == DType::f32)
        SHARDOPT_LAUNCH(sumsq_partials_kernel<float>, patch.count, kThreads, 0, stream)(patch, partials);
    else
        SHARDOPT_LAUNCH(sumsq_partials_kernel<double>, patch.count, kThreads, 0, stream)(patch, partials);
    check_launch("sumsq_partials_kernel");
}

void preload_space_kernels() {
    cudaFuncAttributes attributes{};
    check(cudaFuncGetAttributes(&attributes, add_into_kernel<float>), "loading add_into_kernel<float>");
    check(cudaFuncGetAttributes(&attributes, add_into_kernel<double>), "loading add_into_kernel<double>");
    check(cudaFuncGetAttributes(&attributes, scale_kernel<float>), "loading scale_kernel<float>");
    check(cudaFuncGetAttributes(&attributes, scale_kernel<double>), "loading scale_kernel<double>");
    check(cudaFuncGetAttributes(&attributes, sumsq_partials_kernel<float>), "loading sumsq_partials_kernel<float>");
    check(cudaFuncGetAttributes(&attributes, sumsq_partials_kernel<double>), "loading sumsq_partials_kernel<double>");
}

} // namespace shardopt::engine::detail

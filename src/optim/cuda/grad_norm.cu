// Pass 1 of a step: the sum of squares of every gradient, one partial per chunk. The same sum
// is the finite check (a NaN or Inf gradient makes it non-finite; finite float gradients
// squared and summed in double never overflow) and, once reduced, the global norm.
#include "block_reduce.cuh"
#include "cuda/cuda_check.hpp"
#include "dtype_dispatch.cuh"
#include "launch.hpp"
#include "multi_tensor.cuh"
#include "kernel_launch.cuh"

namespace shardopt::cuda::detail {
namespace {

template <class P>
__global__ void __launch_bounds__(kBlockThreads)
    grad_sumsq_kernel(const TensorEntry *tensors, const Chunk *chunks, double *partials) {
    const ChunkRef ref = this_chunk(tensors, chunks);
    const P *grad = static_cast<const P *>(ref.tensor.grad) + ref.chunk.offset;
    const int n = ref.chunk.count;
    double sum = 0.0;
    for_chunk<kVectorWidth<P>>(n, vector_head(n, grad), [&](auto lanes, int i) {
        constexpr int L = decltype(lanes)::value;
        float g[L];
        load<L>(grad + i, g);
#pragma unroll
        for (int k = 0; k < L; ++k) sum += double(g[k]) * double(g[k]);
    });
    sum = block_sum<kBlockThreads>(sum);
    if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

} // namespace

void launch_grad_sumsq(const ChunkLaunch &launch, double *partials) {
    with_param_type(launch.dtype, [&](auto *tag) {
        using P = std::remove_pointer_t<decltype(tag)>;
        SHARDOPT_LAUNCH(grad_sumsq_kernel<P>, launch.chunk_count, kBlockThreads, 0, launch.stream)(launch.tensors, launch.chunks,
                                                                                      partials);
    });
    check_launch("grad_sumsq_kernel");
}

void preload_grad_sumsq(DType dtype) {
    with_param_type(dtype, [&](auto *tag) {
        using P = std::remove_pointer_t<decltype(tag)>;
        cudaFuncAttributes attributes{};
        check(cudaFuncGetAttributes(&attributes, grad_sumsq_kernel<P>), "loading grad_sumsq_kernel");
    });
}

} // namespace shardopt::cuda::detail

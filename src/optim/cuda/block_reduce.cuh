// Block-wide sum in double whose order depends only on the block size, so a norm comes out
// bitwise the same on every run (the project's reductions are reproducible; atomics are not).
#pragma once

namespace shardopt::cuda::detail {

__device__ __forceinline__ double warp_sum(double value) {
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) value += __shfl_down_sync(0xffffffffu, value, offset);
    return value;
}

// Every thread of the block calls it (blockDim.x == kThreads); the sum is valid in thread 0.
// Ends with a barrier, so it may be called again at once.
template <int kThreads> __device__ __forceinline__ double block_sum(double value) {
    static_assert(kThreads % 32 == 0 && kThreads <= 1024, "whole warps, one block");
    __shared__ double warp_sums[kThreads / 32];
    const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
    value = warp_sum(value);
    if (lane == 0) warp_sums[warp] = value;
    __syncthreads();
    if (warp == 0) value = warp_sum(lane < kThreads / 32 ? warp_sums[lane] : 0.0);
    __syncthreads();
    return value;
}

} // namespace shardopt::cuda::detail

// Runs a kernel's grid on the host: block after block, each block's threads as fibers
// (Boost.Context) on the calling thread, switching only where CUDA threads wait for each other
// (__syncthreads, warp shuffles). Threads see their own threadIdx/blockIdx, a block shares its
// __shared__ variables (thread_local statics: one block runs per OS thread at a time), and a
// barrier releases once every thread of the block (or warp) still running has arrived, as on a
// GPU where exited threads no longer count.
#pragma once

#include <vector_types.h>

#include <cstdint>
#include <functional>

namespace cuda_standin {

// The CUDA thread the calling fiber is (valid only inside run_grid's body).
const uint3 &thread_index();
const uint3 &block_index();
const dim3 &block_dim();
const dim3 &grid_dim();

// Runs body once per thread of every block (grid.x*y*z blocks of block.x*y*z threads).
void run_grid(dim3 grid, dim3 block, const std::function<void()> &body);

// __syncthreads(): waits for every running thread of the block.
void sync_block();
// The warp-level exchange behind __shfl_down_sync: every running lane of the calling thread's
// warp publishes 8 bytes, and each receives those of lane + delta (its own beyond the warp).
uint64_t shuffle_down(uint64_t bits, int delta);

} // namespace cuda_standin

// The CUDA space's sum of squares (space_kernels.cu) computed on the host in the same order of
// operations, so ZeRO-Offload's norm over the host copies of the gradients is the very double the
// device would have summed: the skip and clip decisions, the clip factor and StepResult::grad_norm
// stay bit for bit those of the run without offload.
//
// The order: every span is cut into chunks of kSumsqChunkElements (the last of a span may be
// shorter). In a chunk, thread t of kSumsqThreads sums x*x in double over elements t, t + 256,
// ... in order; the threads' sums are added warp by warp in a shuffle-down tree (offsets 16, 8,
// 4, 2, 1), then warp 0 adds the 8 warp sums the same way; the chunk sums are added in chunk
// order. Built without FMA contraction, as the kernel is.
#pragma once

#include <cstddef>
#include <vector>

#include "space.hpp"

namespace shardopt::engine {

constexpr std::size_t kSumsqChunkElements = 65536;
constexpr int kSumsqThreads = 256;

// Error(invalid_argument) unless dtype is f32 or f64.
double sum_of_squares_in_kernel_order(const std::vector<Span> &spans, DType dtype);

} // namespace shardopt::engine

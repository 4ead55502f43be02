// Host entry points of the CUDA space's element-wise kernels (space_kernels.cu). Each enqueues
// on `stream` and returns at once; a bad launch is thrown as Error by check_launch. Element
// types: f32 and f64 (Error(invalid_argument) for any other), as the CPU passes in
// optim/vector_ops.cpp, whose arithmetic they repeat operation for operation.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "shardopt/types.hpp"
#include "sumsq_order.hpp"

namespace shardopt::engine::detail {

// Error(invalid_argument) unless dtype is f32 or f64 (the CPU passes' message).
void require_float(DType dtype);

// dst[i] += src[i]
void launch_add_into(void *dst, const void *src, std::size_t count, DType dtype, cudaStream_t stream);
// data[i] *= T(factor): the factor is rounded to the element type first, as the CPU pass does.
void launch_scale(void *data, std::size_t count, DType dtype, double factor, cudaStream_t stream);

// Sum-of-squares partials: every span is cut into chunks of kSumsqChunk elements (the last one
// of a span may be shorter), numbered in span order; partial c is chunk c's sum of squares in
// double, in an order that depends only on the chunk's length. Summing the partials in chunk
// order on the host makes the whole sum reproducible from run to run, and the same as
// sumsq_order.hpp's host version of it (ZeRO-Offload's norm).
constexpr std::size_t kSumsqChunk = kSumsqChunkElements;

// A group of chunks small enough to travel in one launch's arguments (no table to upload, so
// no host memory has to outlive the call).
constexpr int kSumsqPatchChunks = 240;
struct SumsqPatch {
    int32_t count = 0; // chunks used
    const void *data[kSumsqPatchChunks] = {};
    int32_t elements[kSumsqPatchChunks] = {};
};

// partials[c] for the patch's chunks c = 0 .. patch.count-1.
void launch_sumsq_partials(const SumsqPatch &patch, double *partials, DType dtype, cudaStream_t stream);

// Loads every kernel above now (cudaFuncGetAttributes). With CUDA's lazy module loading the
// first launch would otherwise load the module, which may wait for the device, and so for a
// collective in flight on another stream.
void preload_space_kernels();

} // namespace shardopt::engine::detail

// Host side of the multi-tensor layout: the chunk table (every tensor cut into chunks of at
// most kChunkElements, one block each) and where each tensor's fp32 arrays (master weights,
// state slots) start inside the optimizer's own device arrays.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tensor_table.hpp"

namespace shardopt::cuda::detail {

struct ChunkPlan {
    std::vector<Chunk> chunks;
    std::vector<TensorChunks> tensor_chunks; // per tensor, its range of chunks
    std::vector<int64_t> fp32_offsets;       // per tensor, its first element in each fp32 array
    int64_t fp32_elements = 0;               // elements per fp32 array (slot or master)
};

// counts[t] elements at param_addresses[t] (elem_size bytes each). A tensor's fp32 arrays are
// placed at the same position modulo 16 bytes as its parameters (measured in elements), so a
// parameter starting one element past a 16-byte boundary still gets vector accesses for its
// state and master weights. Throws Error(invalid_argument) for more chunks than a launch holds.
ChunkPlan plan_chunks(const std::vector<std::size_t> &counts, const std::vector<std::uintptr_t> &param_addresses,
                      std::size_t elem_size);

} // namespace shardopt::cuda::detail

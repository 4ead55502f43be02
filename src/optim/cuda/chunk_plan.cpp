#include "chunk_plan.hpp"

#include <algorithm>
#include <limits>
#include <string>

#include "shardopt/error.hpp"

namespace shardopt::cuda::detail {

ChunkPlan plan_chunks(const std::vector<std::size_t> &counts, const std::vector<std::uintptr_t> &param_addresses,
                      std::size_t elem_size) {
    ChunkPlan plan;
    plan.tensor_chunks.resize(counts.size());
    plan.fp32_offsets.resize(counts.size());
    std::size_t total_chunks = 0;
    for (std::size_t count : counts) total_chunks += (count + kChunkElements - 1) / kChunkElements;
    // One block per chunk; the grid's x dimension and the table's int32 fields bound it.
    require(total_chunks <= std::size_t(std::numeric_limits<int32_t>::max()), ErrorCode::invalid_argument,
            "the tensors need " + std::to_string(total_chunks) + " chunks of " + std::to_string(kChunkElements) +
                " elements, more than one launch can cover");
    plan.chunks.reserve(total_chunks);

    int64_t cursor = 0;
    for (std::size_t t = 0; t < counts.size(); ++t) {
        // The element position of the parameters within their 16-byte word, modulo 4 (the
        // floats in one word): the fp32 arrays start at the same position.
        const int64_t want = int64_t(param_addresses[t] % 16 / elem_size % 4);
        cursor += (want - cursor % 4 + 4) % 4;
        plan.fp32_offsets[t] = cursor;
        cursor += int64_t(counts[t]);

        plan.tensor_chunks[t].first = int32_t(plan.chunks.size());
        for (std::size_t offset = 0; offset < counts[t]; offset += kChunkElements) {
            Chunk chunk;
            chunk.tensor = int32_t(t);
            chunk.count = int32_t(std::min<std::size_t>(kChunkElements, counts[t] - offset));
            chunk.offset = int64_t(offset);
            plan.chunks.push_back(chunk);
        }
        plan.tensor_chunks[t].count = int32_t(plan.chunks.size()) - plan.tensor_chunks[t].first;
    }
    // A whole number of 16-byte words: the state slots lie back to back at this stride, so
    // each one starts aligned as the first does and the kernels' vector path stays open for
    // every slot (an odd total put slot 1 off by a float and every chunk on the scalar path).
    plan.fp32_elements = (cursor + 3) / 4 * 4;
    return plan;
}

} // namespace shardopt::cuda::detail

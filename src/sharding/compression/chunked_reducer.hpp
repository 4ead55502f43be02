// The reducer of the chunk methods (bf16, fp16, int8, int4, top_k): phase one sends chunk j of
// each rank's compressed bucket to rank j, which sums the p decoded chunks in rank order; an
// allreduce then compresses each reduced chunk again (with the owner's own residual) and
// allgathers them.
#pragma once

#include "compressed_reducer.hpp"

namespace shardopt::compression {

std::unique_ptr<CompressedReducer> make_chunked_reducer(CommunicatorPtr comm, const ParameterSet &layout,
                                                        const CompressionOptions &options, ReduceMode mode);
// What its state_bytes() is once every bucket was reduced (layout: planned for the group).
std::size_t chunked_reducer_bytes(const ParameterSet &layout, const CompressionOptions &options, ReduceMode mode);

} // namespace shardopt::compression

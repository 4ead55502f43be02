// OwnedSegment: a slice of one tensor that an update, norm or checkpoint part runs over, with
// where it sits in the padded flat layout and in this rank's storage.
#pragma once

#include <cstddef>
#include <vector>

#include "shardopt/comm.hpp"
#include "shardopt/params.hpp"

namespace shardopt {

struct OwnedSegment {
    int tensor;
    std::size_t flat;  // element index in the padded flat layout
    std::size_t local; // element index in this rank's storage (flat, or shard index)
    std::size_t count;
};

// Chunk `group_rank` of every bucket, cut at tensor boundaries (what a rank owns when state is
// sharded), and every tensor whole (when it is not). `local` indexes the shard buffer in the
// first, the flat buffer in the second.
std::vector<OwnedSegment> owned_chunks(const ParameterSet &layout, int group_rank);
std::vector<OwnedSegment> whole_tensors(const ParameterSet &layout);

// Packed copy (every tensor in order) of a host buffer laid out over the layout's buckets: the
// full padded buffer when `shard` is null, else this rank's shard buffer, gathered bucket by
// bucket over `shard` (collective there).
void gather_packed(const ParameterSet &layout, Communicator *shard, const unsigned char *base, void *packed);

} // namespace shardopt

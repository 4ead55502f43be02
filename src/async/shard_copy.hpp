// Shard k of a full padded flat buffer: chunk k of every bucket, back to back (the layout of a
// rank's shard buffer, OwnedSegment::local). What a worker sends owner k of its gradient, and
// what it receives from owner k of a version.
#pragma once

#include "shardopt/params.hpp"

namespace shardopt::async {

// shard (layout.shard_count() elements) <- chunk k of every bucket of full.
void copy_shard_out(const ParameterSet &layout, int k, const unsigned char *full, unsigned char *shard);
// chunk k of every bucket of full <- shard.
void copy_shard_in(const ParameterSet &layout, int k, const unsigned char *shard, unsigned char *full);

} // namespace shardopt::async

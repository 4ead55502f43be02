// Copies whose destination is not read again soon and is far larger than the caches: the
// stores bypass the cache (non-temporal), so the destination's lines are neither read from
// memory first nor left evicting what is still in use. Used where a large collective's output
// is written (cma_collective.cpp); ordinary stores are faster for anything that fits in cache.
#pragma once

#include <cstddef>

namespace shardopt {

// dst[0..bytes) = src[0..bytes); the regions must not overlap. Call streaming_fence() before
// other threads or processes may read dst.
void streaming_copy(void *dst, const void *src, std::size_t bytes);

// Orders every earlier streaming_copy store before later stores (non-temporal stores are
// weakly ordered on x86).
void streaming_fence();

} // namespace shardopt

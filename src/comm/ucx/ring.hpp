// Ring building blocks shared by ring allreduce, reduce_scatter, reduce and allgather.
#pragma once

#include <functional>

#include "algorithms.hpp"

namespace shardopt::ucx {

// Pipelined ring reduce-scatter. With shift c, at step k (0..n-2) rank r sends segment
// (r - k + c) to r+1 and receives segment (r - k - 1 + c) from r-1, then stores
// incoming op own-input into dst(k, segment) chunk by chunk, forwarding each chunk as soon as it
// is reduced. Rank r ends owning segment (r + 1 + c) at dst(n-2, ...). Segment s is therefore
// reduced in the fixed order s-th rank's input first, then each next rank's around the ring.
struct RingReduceScatter {
    Exchange *ex = nullptr;
    const Segments *segs = nullptr;
    const unsigned char *in = nullptr; // this rank's full input
    int shift = 0;
    std::uint32_t step_base = 0;
    // Where step k's result for segment s goes (elements offset 0 of that segment).
    std::function<unsigned char *(int k, int s)> dst;
    // dst double-buffers across steps (partials in scratch): wait for the previous step's
    // sends before overwriting.
    bool double_buffered = false;
    // Called after each chunk of the final step is reduced: (element offset in the owned
    // segment, element count).
    std::function<void(std::size_t, std::size_t)> on_final_chunk;
    void run();
};

// Tag step of chunk j at ring step k (shared so a caller can post allgather step 0 early).
std::uint32_t ring_step_tag(std::uint32_t base, int k, std::size_t j, std::size_t chunks_per_step);
std::size_t chunk_elems(DType dtype);
std::size_t chunks_of(std::size_t count, std::size_t per_chunk);

// Ring allgather on a buffer holding all segments at `base`. Rank r starts owning segment
// (r + shift); each step forwards the segment received in the previous one. When
// `first_sends_posted`, step 0's sends were already issued by the caller.
void ring_allgather_segments(Exchange &ex, const Segments &segs, unsigned char *base, int shift,
                             std::uint32_t step_base, bool first_sends_posted);

} // namespace shardopt::ucx

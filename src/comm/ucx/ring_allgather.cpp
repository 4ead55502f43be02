// Ring allgather: each rank's block travels n-1 hops, received in place into the output.
#include <cstring>

#include "ring.hpp"

namespace shardopt::ucx {

void ring_allgather(Exchange &ex) {
    const Call &call = ex.call();
    const std::size_t bytes = call.count * dtype_size(call.dtype);
    auto *out = static_cast<unsigned char *>(call.recv);
    unsigned char *mine = out + std::size_t(ex.rank()) * bytes;
    if (bytes && call.send != mine) std::memmove(mine, call.send, bytes);
    const Segments segs = equal_segments(call.count, ex.size());
    ring_allgather_segments(ex, segs, out, 0, 0, false);
}

} // namespace shardopt::ucx

// Large reduce: ring reduce-scatter (into the root's output, or scratch elsewhere), then each
// owner sends its finished segment straight to the root.
#include "../reduction.hpp"
#include "ring.hpp"

namespace shardopt::ucx {

void ring_reduce(Exchange &ex) {
    const Call &call = ex.call();
    const int n = ex.size(), r = ex.rank(), root = call.root;
    const std::size_t elem = dtype_size(call.dtype);
    const Segments segs = even_segments(call.count, n);
    unsigned char *buf = r == root ? static_cast<unsigned char *>(call.recv) : ex.comm().scratch(2, call.count * elem);
    const std::size_t cps = chunks_of(segs.max_count, chunk_elems(call.dtype));
    const std::uint32_t gather_step = std::uint32_t(std::size_t(n - 1) * cps);

    RingReduceScatter rs;
    rs.ex = &ex;
    rs.segs = &segs;
    rs.in = static_cast<const unsigned char *>(call.send);
    rs.shift = 0;
    rs.dst = [&](int, int s) { return buf + segs.offset[s] * elem; };
    rs.run();
    const int own = (r + 1) % n;
    if (call.op == ReduceOp::avg) divide_by_count(buf + segs.offset[own] * elem, segs.count[own], call.dtype, n);
    if (r != root) {
        if (segs.count[own]) ex.send(root, gather_step, buf + segs.offset[own] * elem, segs.count[own] * elem);
    } else {
        for (int o = 0; o < n; ++o) {
            const int s = (o + 1) % n;
            if (o != root && segs.count[s]) ex.recv(o, gather_step, buf + segs.offset[s] * elem, segs.count[s] * elem);
        }
    }
    ex.wait_all();
}

} // namespace shardopt::ucx

// Pipelined ring allreduce: ring reduce-scatter where each finished chunk of the owned segment
// is divided (avg) and immediately sent on as allgather step 0, then a ring allgather that
// receives straight into the output buffer.
#include "../reduction.hpp"
#include "ring.hpp"

namespace shardopt::ucx {

void ring_allreduce(Exchange &ex) {
    const Call &call = ex.call();
    const int n = ex.size(), r = ex.rank();
    const std::size_t elem = dtype_size(call.dtype);
    const Segments segs = even_segments(call.count, n);
    auto *out = static_cast<unsigned char *>(call.recv);
    const std::size_t per = chunk_elems(call.dtype);
    const std::size_t cps = chunks_of(segs.max_count, per);
    const std::uint32_t ag_base = std::uint32_t(std::size_t(n - 1) * cps);
    const int own = (r + 1) % n, next = (r + 1) % n;

    RingReduceScatter rs;
    rs.ex = &ex;
    rs.segs = &segs;
    rs.in = static_cast<const unsigned char *>(call.send);
    rs.shift = 0;
    rs.step_base = 0;
    rs.dst = [&](int, int s) { return out + segs.offset[s] * elem; };
    rs.on_final_chunk = [&](std::size_t off, std::size_t m) {
        unsigned char *p = out + (segs.offset[own] + off) * elem;
        if (call.op == ReduceOp::avg) divide_by_count(p, m, call.dtype, n);
        ex.send(next, ring_step_tag(ag_base, 0, off / per, cps), p, m * elem);
    };
    rs.run();
    ring_allgather_segments(ex, segs, out, 1, ag_base, true);
}

} // namespace shardopt::ucx

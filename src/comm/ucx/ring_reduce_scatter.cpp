// Ring reduce_scatter: partial sums travel the ring in two scratch buffers (the output holds
// only this rank's segment), the last step writes the output.
#include "../reduction.hpp"
#include "ring.hpp"

namespace shardopt::ucx {

void ring_reduce_scatter(Exchange &ex) {
    const Call &call = ex.call();
    const int n = ex.size();
    const std::size_t elem = dtype_size(call.dtype);
    const Segments segs = equal_segments(call.count, n);
    auto *out = static_cast<unsigned char *>(call.recv);
    unsigned char *partial[2] = {ex.comm().scratch(2, call.count * elem), ex.comm().scratch(3, call.count * elem)};

    RingReduceScatter rs;
    rs.ex = &ex;
    rs.segs = &segs;
    rs.in = static_cast<const unsigned char *>(call.send);
    rs.shift = -1; // rank r ends with segment r
    rs.step_base = 0;
    rs.double_buffered = true;
    rs.dst = [&](int k, int) { return k == n - 2 ? out : partial[k % 2]; };
    rs.run();
    if (call.op == ReduceOp::avg) divide_by_count(out, call.count, call.dtype, n);
}

} // namespace shardopt::ucx

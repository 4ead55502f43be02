// Recursive-doubling allreduce for small messages: log2(n) exchanges of the whole buffer.
// With n not a power of two, the first 2*rem ranks pair up: even ones hand their data to the
// odd neighbour, sit out, and get the result back at the end. Pairs always combine as
// (lower rank's partial) op (higher rank's partial), so every rank gets identical bits.
#include <cstring>

#include "../reduction.hpp"
#include "algorithms.hpp"

namespace shardopt::ucx {

void recursive_doubling_allreduce(Exchange &ex) {
    const Call &call = ex.call();
    const int n = ex.size(), r = ex.rank();
    const std::size_t bytes = call.count * dtype_size(call.dtype);
    if (bytes == 0) return;
    const ReduceOp op = accumulate_op(call.op);
    auto *buf = static_cast<unsigned char *>(call.recv);
    if (call.send != buf) std::memmove(buf, call.send, bytes);
    unsigned char *tmp = ex.comm().scratch(0, bytes);
    int p = 1;
    while (p * 2 <= n) p *= 2;
    const int rem = n - p;
    constexpr std::uint32_t kFoldIn = 0, kFoldOut = 63;

    auto combine = [&](bool partner_lower) {
        const void *lower_first[2] = {tmp, buf}, *mine_first[2] = {buf, tmp};
        reduce_inputs(partner_lower ? lower_first : mine_first, 2, buf, call.count, call.dtype, op);
    };

    int newrank;
    if (r < 2 * rem) {
        if (r % 2 == 0) {
            ex.wait(ex.send(r + 1, kFoldIn, buf, bytes));
            newrank = -1;
        } else {
            ex.wait(ex.recv(r - 1, kFoldIn, tmp, bytes));
            combine(true);
            newrank = r / 2;
        }
    } else {
        newrank = r - rem;
    }
    if (newrank >= 0) {
        std::uint32_t step = 1;
        for (int mask = 1; mask < p; mask <<= 1, ++step) {
            const int pn = newrank ^ mask;
            const int peer = pn < rem ? pn * 2 + 1 : pn + rem;
            Request &rq = ex.recv(peer, step, tmp, bytes);
            Request &sq = ex.send(peer, step, buf, bytes);
            ex.wait(rq);
            ex.wait(sq);
            combine(pn < newrank);
        }
        if (call.op == ReduceOp::avg) divide_by_count(buf, call.count, call.dtype, n);
        if (r < 2 * rem) ex.wait(ex.send(r - 1, kFoldOut, buf, bytes));
    } else {
        ex.wait(ex.recv(r + 1, kFoldOut, buf, bytes));
    }
}

} // namespace shardopt::ucx

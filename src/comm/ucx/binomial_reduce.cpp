// Binomial-tree reduce for small messages. A rank combines its children in increasing
// distance, always as (own partial) op (child's partial): the child covers higher virtual
// ranks, so the order is fixed for a given size and root.
#include <cstring>

#include "../reduction.hpp"
#include "algorithms.hpp"

namespace shardopt::ucx {

void binomial_reduce(Exchange &ex) {
    const Call &call = ex.call();
    const int n = ex.size(), r = ex.rank(), root = call.root;
    const std::size_t bytes = call.count * dtype_size(call.dtype);
    if (bytes == 0) return;
    const ReduceOp op = accumulate_op(call.op);
    unsigned char *acc = r == root ? static_cast<unsigned char *>(call.recv) : ex.comm().scratch(1, bytes);
    if (acc != call.send) std::memmove(acc, call.send, bytes);
    unsigned char *tmp = ex.comm().scratch(0, bytes);
    const int vr = (r - root + n) % n;
    std::uint32_t step = 0;
    for (int m = 1; m < n; m <<= 1, ++step) {
        if (vr & m) {
            ex.wait(ex.send((vr - m + root) % n, step, acc, bytes));
            return;
        }
        if (vr + m < n) {
            ex.wait(ex.recv((vr + m + root) % n, step, tmp, bytes));
            const void *inputs[2] = {acc, tmp};
            reduce_inputs(inputs, 2, acc, call.count, call.dtype, op);
        }
    }
    if (call.op == ReduceOp::avg) divide_by_count(acc, call.count, call.dtype, n);
}

} // namespace shardopt::ucx

// Binomial-tree broadcast, pipelined: a rank forwards each chunk to its children (largest
// subtree first) as soon as that chunk arrived from its parent.
#include <algorithm>

#include "ring.hpp"

namespace shardopt::ucx {

void binomial_broadcast(Exchange &ex) {
    const Call &call = ex.call();
    const int n = ex.size(), r = ex.rank(), root = call.root;
    const std::size_t bytes = call.count * dtype_size(call.dtype);
    if (bytes == 0) return;
    auto *buf = static_cast<unsigned char *>(call.recv);
    const std::size_t per = chunk_elems(call.dtype) * dtype_size(call.dtype);
    const int vr = (r - root + n) % n;
    const int low = vr == 0 ? 0 : (vr & -vr); // my subtree spans [vr, vr + low)
    std::vector<int> children;
    int top = 1;
    while (top < n) top <<= 1;
    for (int m = (vr == 0 ? top : low) >> 1; m >= 1; m >>= 1)
        if (vr + m < n) children.push_back((vr + m + root) % n);
    std::vector<Request *> recvs;
    if (vr != 0) {
        const int parent = (vr - low + root) % n;
        for (std::size_t off = 0, j = 0; off < bytes; off += per, ++j)
            recvs.push_back(&ex.recv(parent, std::uint32_t(j), buf + off, std::min(per, bytes - off)));
    }
    for (std::size_t off = 0, j = 0; off < bytes; off += per, ++j) {
        if (vr != 0) ex.wait(*recvs[j]);
        for (int c : children) ex.send(c, std::uint32_t(j), buf + off, std::min(per, bytes - off));
    }
    ex.wait_all();
}

} // namespace shardopt::ucx

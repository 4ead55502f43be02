// A communicator of one: every collective is a copy (avg over one rank is the value itself).
#include <cstring>

#include "algorithms.hpp"

namespace shardopt::ucx {

void local_collective(Exchange &ex) {
    const Call &call = ex.call();
    const std::size_t bytes = call.count * dtype_size(call.dtype);
    switch (call.kind) {
    case CallKind::allreduce:
    case CallKind::reduce:
    case CallKind::reduce_scatter:
    case CallKind::allgather:
        if (bytes && call.recv != call.send) std::memmove(call.recv, call.send, bytes);
        break;
    default: break;
    }
}

} // namespace shardopt::ucx

#include "forward_call.hpp"

namespace shardopt {

void forward_call(Communicator &comm, const Call &c) {
    switch (c.kind) {
    case CallKind::allreduce: return comm.allreduce(c.send, c.recv, c.count, c.dtype, c.op);
    case CallKind::reduce_scatter: return comm.reduce_scatter(c.send, c.recv, c.count, c.dtype, c.op);
    case CallKind::allgather: return comm.allgather(c.send, c.recv, c.count, c.dtype);
    case CallKind::broadcast: return comm.broadcast(c.recv, c.count, c.dtype, c.root);
    case CallKind::reduce: return comm.reduce(c.send, c.recv, c.count, c.dtype, c.op, c.root);
    case CallKind::barrier: return comm.barrier();
    case CallKind::send: return comm.send(c.send, c.count, c.dtype, c.root, c.tag);
    case CallKind::recv: return comm.recv(c.recv, c.count, c.dtype, c.root, c.tag);
    case CallKind::split: break;
    }
    throw Error(ErrorCode::internal, "forward_call: cannot forward " + describe(c));
}

} // namespace shardopt

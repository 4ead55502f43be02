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

MovedBuffers moved_buffers(const Call &call, int rank, int size) {
    const std::size_t bytes = call.count * dtype_size(call.dtype), all = bytes * std::size_t(size);
    const bool root = call.root == rank;
    MovedBuffers m;
    m.in_source = call.send;
    switch (call.kind) {
    case CallKind::allreduce: m.in_capacity = m.out_capacity = bytes; break;
    case CallKind::reduce_scatter:
        m.in_capacity = all;
        m.out_capacity = bytes;
        break;
    case CallKind::allgather:
        m.in_capacity = bytes;
        m.out_capacity = all;
        break;
    case CallKind::reduce: m.in_capacity = m.out_capacity = bytes; break;
    case CallKind::broadcast:
        m.in_place = true;
        m.in_source = call.recv;
        m.in_capacity = bytes;
        break;
    case CallKind::barrier:
    case CallKind::send:
    case CallKind::recv:
    case CallKind::split:
        throw Error(ErrorCode::internal, "moved_buffers: " + describe(call) + " moves no collective buffers");
    }
    m.in_bytes = m.in_capacity;
    m.out_bytes = m.out_capacity;
    if (call.kind == CallKind::broadcast) { // one buffer: in at the root, out everywhere else
        m.in_bytes = root ? bytes : 0;
        m.out_bytes = root ? 0 : bytes;
    }
    if (call.kind == CallKind::reduce && !root) m.out_bytes = 0;
    return m;
}

} // namespace shardopt

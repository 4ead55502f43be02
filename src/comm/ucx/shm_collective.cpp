// Small collectives among the ranks of one host, through the shared-memory arena: each rank
// published its whole input beside its header, so once every header is in, each rank computes
// its result straight from the slots. One handoff per peer instead of log2(n) message rounds;
// reductions take the inputs in rank order, so every rank gets identical bits.
#include <cstring>
#include <vector>

#include "../reduction.hpp"
#include "algorithms.hpp"
#include "shm_arena.hpp"
#include "test_hook.hpp"

namespace shardopt::ucx {

const void *shm_payload(const Call &call, int rank, int n, std::size_t &bytes) {
    const std::size_t elem = dtype_size(call.dtype);
    switch (call.kind) {
    case CallKind::allreduce:
    case CallKind::reduce:
    case CallKind::allgather: bytes = call.count * elem; return call.send;
    case CallKind::reduce_scatter: bytes = call.count * std::size_t(n) * elem; return call.send;
    case CallKind::broadcast:
        bytes = rank == call.root ? call.count * elem : 0;
        return call.recv;
    default: bytes = 0; return nullptr;
    }
}

bool shm_fits(const Call &call, int n, std::size_t capacity) {
    if (call.kind == CallKind::split || call.kind == CallKind::send || call.kind == CallKind::recv) return false;
    std::size_t bytes = 0;
    shm_payload(call, call.kind == CallKind::broadcast ? call.root : 0, n, bytes);
    return bytes <= capacity;
}

void shm_collective(Exchange &ex) {
    ex.wait_headers();
    const std::uint64_t seq = ex.headers()[ex.rank()].seq;
    test_hook::stop_point(test_hook::shm, seq);
    shm_result(ex.comm(), *ex.arena(), ex.call(), seq);
}

void shm_result(Communicator &comm, const ShmArena &arena, const Call &call, std::uint64_t seq) {
    const int n = comm.size(), r = comm.rank();
    const std::size_t elem = dtype_size(call.dtype), bytes = call.count * elem;
    if (bytes == 0) return;
    // At most ShmArena::kMaxRanks inputs: a fixed array keeps the hot path free of allocation.
    const void *inputs[ShmArena::kMaxRanks];
    // What this rank copies out of the other ranks' payloads (the arena write of its own is staging).
    const std::size_t foreign = std::size_t(n - 1) * bytes;
    switch (call.kind) {
    case CallKind::allreduce:
    case CallKind::reduce:
        if (call.kind == CallKind::reduce && r != call.root) return;
        comm.count_sent(foreign);
        for (int p = 0; p < n; ++p) inputs[p] = arena.payload(p, seq, bytes);
        reduce_inputs(inputs, n, call.recv, call.count, call.dtype, call.op);
        return;
    case CallKind::reduce_scatter: {
        comm.count_sent(foreign);
        const std::size_t published = bytes * std::size_t(n); // each rank published its whole input
        for (int p = 0; p < n; ++p) inputs[p] = arena.payload(p, seq, published) + std::size_t(r) * bytes;
        reduce_inputs(inputs, n, call.recv, call.count, call.dtype, call.op);
        return;
    }
    case CallKind::allgather:
        comm.count_sent(foreign);
        for (int p = 0; p < n; ++p)
            std::memcpy(static_cast<unsigned char *>(call.recv) + std::size_t(p) * bytes, arena.payload(p, seq, bytes),
                        bytes);
        return;
    case CallKind::broadcast:
        if (r != call.root) {
            comm.count_sent(bytes);
            std::memcpy(call.recv, arena.payload(call.root, seq, bytes), bytes);
        }
        return;
    default: return;
    }
}

} // namespace shardopt::ucx

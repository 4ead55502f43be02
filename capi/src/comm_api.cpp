// Communicators and collectives on raw buffers: shardopt_comm_*, shardopt_<collective>[_async],
// shardopt_work_*.
#include <cstdlib>
#include <vector>

#include "capi_internal.hpp"
#include "shardopt/gpu_comm.hpp"
#include "shardopt/inprocess.hpp"
#include "shardopt/ucx.hpp"

using namespace shardopt;
using namespace shardopt::capi;

namespace {

shardopt_comm wrap(CommunicatorPtr comm) {
    auto *h = new shardopt_comm_s;
    h->comm = std::move(comm);
    return h;
}

// Issues an async collective and hands its Work out as a handle.
template <typename F> void issue_async(shardopt_work *work, F &&issue) {
    not_null(work, "work");
    std::unique_ptr<shardopt_work_s> h(new shardopt_work_s);
    h->work = issue();
    *work = h.release();
}

std::string env_or_empty(const char *name) {
    const char *v = std::getenv(name);
    return v ? v : "";
}

} // namespace

extern "C" {

SHARDOPT_API shardopt_status shardopt_comm_create_inprocess(int size, shardopt_comm *comms) {
    return guard(__func__, [&] {
        not_null(comms, "comms");
        require(size >= 1, ErrorCode::invalid_argument, "size must be >= 1, got " + std::to_string(size));
        auto group = make_inprocess_group(size);
        std::vector<std::unique_ptr<shardopt_comm_s>> handles;
        handles.reserve(group.size());
        for (auto &c : group) handles.emplace_back(wrap(c));
        for (std::size_t r = 0; r < handles.size(); ++r) comms[r] = handles[r].release();
    });
}

SHARDOPT_API shardopt_status shardopt_comm_create_from_env(const char *backend, shardopt_comm *comm) {
    return guard(__func__, [&] {
        not_null(comm, "comm");
        std::string name = backend ? backend : env_or_empty("SHARDOPT_BACKEND");
        if (name.empty()) name = "inprocess";
        if (name == "inprocess") {
            const std::string ws = env_or_empty("SHARDOPT_WORLD_SIZE");
            require(ws.empty() || ws == "1", ErrorCode::invalid_argument,
                    "the inprocess backend forms a world of one rank per process, but SHARDOPT_WORLD_SIZE=" + ws +
                        ": use shardopt_comm_create_inprocess for threads, or the ucx backend for processes");
            *comm = wrap(make_inprocess_group(1).front());
            return;
        }
        if (name == "ucx") {
            require(ucx_available(), ErrorCode::unsupported, "the ucx backend is not built into this libshardopt");
            *comm = wrap(create_communicator_from_env(name));
            return;
        }
        if (name == "nccl" || name == "staged") {
            // The GPU factories throw Error(unsupported) saying what is missing: the backend not
            // built in, libnccl not loadable, or no usable CUDA device.
            *comm = wrap(create_communicator_from_env(name));
            return;
        }
        throw Error(ErrorCode::invalid_argument, "unknown backend '" + name + "' (inprocess, ucx, nccl, staged)");
    });
}

SHARDOPT_API shardopt_status shardopt_comm_create_single(const char *backend, shardopt_comm *comm) {
    return guard(__func__, [&] {
        not_null(comm, "comm");
        std::string name = backend ? backend : env_or_empty("SHARDOPT_BACKEND");
        if (name.empty()) name = "inprocess";
        require(name == "inprocess" || name == "ucx", ErrorCode::invalid_argument,
                "unknown backend '" + name + "' for a single-process world (inprocess or ucx)");
        BootstrapConfig config = BootstrapConfig::from_env();
        require(config.world_size == 1, ErrorCode::invalid_argument,
                "a single-process world was asked for, but the environment names a world of " +
                    std::to_string(config.world_size) +
                    " ranks (launched by shardopt-run, torchrun, mpirun or srun?): create the communicator from the "
                    "environment instead");
        if (name == "inprocess") {
            *comm = wrap(make_inprocess_group(1).front());
            return;
        }
        require(ucx_available(), ErrorCode::unsupported, "the ucx backend is not built into this libshardopt");
        config.rank = 0;
        *comm = wrap(create_ucx_communicator(config));
    });
}

SHARDOPT_API shardopt_status shardopt_comm_split(shardopt_comm comm, int color, int key, shardopt_comm *out) {
    return guard(__func__, [&] {
        Communicator &c = comm_of(comm);
        not_null(out, "out");
        auto child = c.split(color, key);
        *out = child ? wrap(std::move(child)) : nullptr;
    });
}

SHARDOPT_API shardopt_status shardopt_comm_destroy(shardopt_comm comm) {
    return guard(__func__, [&] { destroy(comm, HandleTag::comm, "communicator"); });
}

SHARDOPT_API shardopt_status shardopt_comm_rank(shardopt_comm comm, int *rank) {
    return guard(__func__, [&] {
        Communicator &c = comm_of(comm);
        not_null(rank, "rank");
        *rank = c.rank();
    });
}

SHARDOPT_API shardopt_status shardopt_comm_size(shardopt_comm comm, int *size) {
    return guard(__func__, [&] {
        Communicator &c = comm_of(comm);
        not_null(size, "size");
        *size = c.size();
    });
}

SHARDOPT_API shardopt_status shardopt_comm_set_timeout(shardopt_comm comm, int64_t timeout_ms) {
    return guard(__func__, [&] { comm_of(comm).set_timeout(std::chrono::milliseconds(timeout_ms)); });
}

SHARDOPT_API shardopt_status shardopt_comm_set_cuda_stream(shardopt_comm comm, void *stream) {
    return guard(__func__, [&] { gpu::set_stream(comm_of(comm), static_cast<gpu::Stream>(stream)); });
}

SHARDOPT_API shardopt_status shardopt_comm_abort(shardopt_comm comm, const char *reason) {
    return guard(__func__, [&] { comm_of(comm).abort(reason ? reason : "aborted by the caller"); });
}

// --- blocking collectives ---------------------------------------------------------------------

SHARDOPT_API shardopt_status shardopt_allreduce(shardopt_comm comm, const void *send, void *recv, size_t count,
                                                shardopt_dtype dtype, shardopt_reduce_op op) {
    return guard(__func__, [&] { comm_of(comm).allreduce(send, recv, count, dtype_arg(dtype), op_arg(op)); });
}

SHARDOPT_API shardopt_status shardopt_reduce_scatter(shardopt_comm comm, const void *send, void *recv,
                                                     size_t recv_count, shardopt_dtype dtype, shardopt_reduce_op op) {
    return guard(__func__,
                 [&] { comm_of(comm).reduce_scatter(send, recv, recv_count, dtype_arg(dtype), op_arg(op)); });
}

SHARDOPT_API shardopt_status shardopt_allgather(shardopt_comm comm, const void *send, void *recv, size_t send_count,
                                                shardopt_dtype dtype) {
    return guard(__func__, [&] { comm_of(comm).allgather(send, recv, send_count, dtype_arg(dtype)); });
}

SHARDOPT_API shardopt_status shardopt_broadcast(shardopt_comm comm, void *buffer, size_t count, shardopt_dtype dtype,
                                                int root) {
    return guard(__func__, [&] { comm_of(comm).broadcast(buffer, count, dtype_arg(dtype), root); });
}

SHARDOPT_API shardopt_status shardopt_scatter(shardopt_comm comm, const void *buffer, size_t count, shardopt_dtype dtype,
                                              int root, void **recv, size_t *recv_count) {
    return guard(__func__, [&] {
        Communicator &c = comm_of(comm);
        const DType dt = dtype_arg(dtype);
        not_null(recv, "recv");
        not_null(recv_count, "recv_count");
        const int size = c.size(), rank = c.rank();
        require(root >= 0 && root < size, ErrorCode::invalid_argument,
                "root " + std::to_string(root) + " outside [0, " + std::to_string(size) + ")");
        // root's count and its part of it, -1 when it refuses them: every rank then fails alike
        std::int64_t counts[2] = {std::int64_t(count), -1};
        if (rank == root && (buffer != nullptr || count == 0) && count % std::size_t(size) == 0)
            counts[1] = std::int64_t(count / std::size_t(size));
        c.broadcast(counts, 2, DType::i64, root);
        require(counts[1] >= 0, ErrorCode::invalid_argument,
                "scatter: root rank " + std::to_string(root) + "'s data (" + std::to_string(counts[0]) + " elements" +
                    (counts[0] % size ? ") is not a multiple of the world size " + std::to_string(size) : ") is NULL"));
        const std::size_t part = std::size_t(counts[1]) * dtype_size(dt);
        std::vector<unsigned char> all(rank == root ? 0 : part * std::size_t(size));
        const unsigned char *from = rank == root ? static_cast<const unsigned char *>(buffer) : all.data();
        if (part) c.broadcast(const_cast<unsigned char *>(from), std::size_t(counts[1]) * std::size_t(size), dt, root);
        void *out = std::malloc(part ? part : 1); // released with shardopt_buffer_free
        if (!out) throw std::bad_alloc();
        if (part) std::memcpy(out, from + std::size_t(rank) * part, part);
        *recv = out;
        *recv_count = std::size_t(counts[1]);
    });
}

SHARDOPT_API shardopt_status shardopt_reduce(shardopt_comm comm, const void *send, void *recv, size_t count,
                                             shardopt_dtype dtype, shardopt_reduce_op op, int root) {
    return guard(__func__, [&] { comm_of(comm).reduce(send, recv, count, dtype_arg(dtype), op_arg(op), root); });
}

SHARDOPT_API shardopt_status shardopt_barrier(shardopt_comm comm) {
    return guard(__func__, [&] { comm_of(comm).barrier(); });
}

SHARDOPT_API shardopt_status shardopt_send(shardopt_comm comm, const void *buffer, size_t count, shardopt_dtype dtype,
                                           int peer, int tag) {
    return guard(__func__, [&] { comm_of(comm).send(buffer, count, dtype_arg(dtype), peer, tag); });
}

SHARDOPT_API shardopt_status shardopt_recv(shardopt_comm comm, void *buffer, size_t count, shardopt_dtype dtype,
                                           int peer, int tag) {
    return guard(__func__, [&] { comm_of(comm).recv(buffer, count, dtype_arg(dtype), peer, tag); });
}

// --- asynchronous forms -----------------------------------------------------------------------

SHARDOPT_API shardopt_status shardopt_allreduce_async(shardopt_comm comm, const void *send, void *recv, size_t count,
                                                      shardopt_dtype dtype, shardopt_reduce_op op,
                                                      shardopt_work *work) {
    return guard(__func__, [&] {
        Communicator &c = comm_of(comm);
        issue_async(work, [&] { return c.allreduce_async(send, recv, count, dtype_arg(dtype), op_arg(op)); });
    });
}

SHARDOPT_API shardopt_status shardopt_reduce_scatter_async(shardopt_comm comm, const void *send, void *recv,
                                                           size_t recv_count, shardopt_dtype dtype,
                                                           shardopt_reduce_op op, shardopt_work *work) {
    return guard(__func__, [&] {
        Communicator &c = comm_of(comm);
        issue_async(work,
                    [&] { return c.reduce_scatter_async(send, recv, recv_count, dtype_arg(dtype), op_arg(op)); });
    });
}

SHARDOPT_API shardopt_status shardopt_allgather_async(shardopt_comm comm, const void *send, void *recv,
                                                      size_t send_count, shardopt_dtype dtype, shardopt_work *work) {
    return guard(__func__, [&] {
        Communicator &c = comm_of(comm);
        issue_async(work, [&] { return c.allgather_async(send, recv, send_count, dtype_arg(dtype)); });
    });
}

SHARDOPT_API shardopt_status shardopt_broadcast_async(shardopt_comm comm, void *buffer, size_t count,
                                                      shardopt_dtype dtype, int root, shardopt_work *work) {
    return guard(__func__, [&] {
        Communicator &c = comm_of(comm);
        issue_async(work, [&] { return c.broadcast_async(buffer, count, dtype_arg(dtype), root); });
    });
}

SHARDOPT_API shardopt_status shardopt_reduce_async(shardopt_comm comm, const void *send, void *recv, size_t count,
                                                   shardopt_dtype dtype, shardopt_reduce_op op, int root,
                                                   shardopt_work *work) {
    return guard(__func__, [&] {
        Communicator &c = comm_of(comm);
        issue_async(work, [&] { return c.reduce_async(send, recv, count, dtype_arg(dtype), op_arg(op), root); });
    });
}

SHARDOPT_API shardopt_status shardopt_barrier_async(shardopt_comm comm, shardopt_work *work) {
    return guard(__func__, [&] {
        Communicator &c = comm_of(comm);
        issue_async(work, [&] { return c.barrier_async(); });
    });
}

SHARDOPT_API shardopt_status shardopt_send_async(shardopt_comm comm, const void *buffer, size_t count,
                                                 shardopt_dtype dtype, int peer, int tag, shardopt_work *work) {
    return guard(__func__, [&] {
        Communicator &c = comm_of(comm);
        issue_async(work, [&] { return c.send_async(buffer, count, dtype_arg(dtype), peer, tag); });
    });
}

SHARDOPT_API shardopt_status shardopt_recv_async(shardopt_comm comm, void *buffer, size_t count, shardopt_dtype dtype,
                                                 int peer, int tag, shardopt_work *work) {
    return guard(__func__, [&] {
        Communicator &c = comm_of(comm);
        issue_async(work, [&] { return c.recv_async(buffer, count, dtype_arg(dtype), peer, tag); });
    });
}

SHARDOPT_API shardopt_status shardopt_work_wait(shardopt_work work) {
    return guard(__func__, [&] { check(work, HandleTag::work, "work")->work->wait(); });
}

SHARDOPT_API shardopt_status shardopt_work_test(shardopt_work work, int *done) {
    return guard(__func__, [&] {
        auto *w = check(work, HandleTag::work, "work");
        not_null(done, "done");
        *done = w->work->test() ? 1 : 0;
    });
}

SHARDOPT_API shardopt_status shardopt_work_destroy(shardopt_work work) {
    return guard(__func__, [&] { destroy(work, HandleTag::work, "work"); });
}

} // extern "C"

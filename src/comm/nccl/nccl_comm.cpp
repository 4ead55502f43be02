#include "nccl_comm.hpp"

#include <cstdint>
#include <utility>

#include "nccl_check.hpp"
#include "nccl_library.hpp"
#include "nccl_ready.hpp"
#include "nccl_types.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/cuda_device.hpp"

namespace shardopt::nccl {

using cuda::detail::DeviceGuard;

namespace {

// Rank and size come from NCCL (a split child's order is NCCL's: by key, then parent rank, as
// Communicator::split specifies). On failure the communicator is aborted: the caller gave it away.
int query(ncclComm_t comm, bool rank) {
    int value = -1;
    const ncclResult_t r = rank ? api().ncclCommUserRank(comm, &value) : api().ncclCommCount(comm, &value);
    if (r != ncclSuccess) {
        const std::string text = describe_result(r, comm, rank ? "ncclCommUserRank" : "ncclCommCount");
        (void)api().ncclCommAbort(comm);
        throw Error(error_code_for(r), "nccl: " + text);
    }
    return value;
}

std::size_t elements_bytes(const Call &call) { return call.count * dtype_size(call.dtype); }

} // namespace

ncclComm_t split_comm(ncclComm_t parent, int color, int key, Clock::time_point deadline,
                      const std::function<void()> &check) {
    ncclConfig_t config = nonblocking_config();
    ncclComm_t child = nullptr;
    ncclResult_t r = api().ncclCommSplit(parent, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &child, &config);
    try {
        // The split's progress shows on the child, or on the parent for a rank that opted out.
        if (r == ncclSuccess || r == ncclInProgress) {
            r = wait_ready(parent, deadline, check);
            if (r == ncclSuccess && child) r = wait_ready(child, deadline, check);
        }
    } catch (...) {
        if (child) (void)api().ncclCommAbort(child);
        throw;
    }
    if (r != ncclSuccess) {
        const std::string text =
            r == ncclInProgress ? "ncclCommSplit did not finish in time (a rank never called split, or is stuck)"
                                : describe_result(r, parent, "ncclCommSplit");
        if (child) (void)api().ncclCommAbort(child);
        throw Error(r == ncclInProgress ? ErrorCode::timeout : error_code_for(r), "nccl: " + text);
    }
    return child;
}

NcclComm::NcclComm(std::shared_ptr<PeerWatch> peers, int device, ncclComm_t comm, Duration timeout)
    : Communicator(query(comm, true), query(comm, false)), DeviceComm(device), peers_(std::move(peers)) {
    coll_.comm = comm;
    try {
        DeviceGuard guard(device);
        barrier_word_ = cuda::detail::DeviceBuffer(16, "the nccl barrier word");
        cuda::detail::check(cudaMemset(barrier_word_.get(), 0, 16), "cudaMemset of the nccl barrier word");
        // Sends and receives on streams of their own: neither waits behind the other or behind
        // a collective.
        coll_lane_.create(false);
        send_lane_.create(true);
        recv_lane_.create(true);
        if (size() > 1) {
            const auto deadline = Clock::now() + timeout;
            auto check = [this] { peers_->check("nccl: creating the point-to-point communicators"); };
            up_.comm = split_comm(comm, 0, rank(), deadline, check);
            down_.comm = split_comm(comm, 0, rank(), deadline, check);
        }
    } catch (...) {
        for (Handle *h : {&coll_, &up_, &down_})
            if (h->comm) (void)api().ncclCommAbort(std::exchange(h->comm, nullptr));
        throw; // the lanes release what they made
    }
}

NcclComm::~NcclComm() {
    shutdown_queues();
    try {
        DeviceGuard guard(device());
        close(down_);
        close(up_);
        close(coll_);
    } catch (...) { // no device to switch to: nothing more can be released cleanly
    }
    (void)cudaGetLastError(); // the lanes are released after this body
}

void NcclComm::close(Handle &handle) noexcept {
    std::lock_guard<std::mutex> lock(handle.mutex);
    if (!handle.comm) return;
    ncclComm_t comm = std::exchange(handle.comm, nullptr);
    // Finalize flushes operations still queued and waits for the peers' finalize; a peer that
    // is gone or stuck must not hold the destructor, so it is bounded and falls back to abort.
    ncclResult_t r = api().ncclCommFinalize(comm);
    try {
        if (r == ncclSuccess || r == ncclInProgress)
            r = wait_ready(comm, Clock::now() + timeout(), [this] { peers_->check("nccl: finalize"); });
    } catch (...) {
        r = ncclInternalError;
    }
    if (r == ncclSuccess)
        (void)api().ncclCommDestroy(comm);
    else
        (void)api().ncclCommAbort(comm);
}

void NcclComm::on_abort(const std::string &reason, ErrorCode code) {
    {
        std::lock_guard<std::mutex> lock(abort_mutex_);
        abort_text_ = reason;
        abort_code_ = code == ErrorCode::ok ? ErrorCode::invalid_state : code;
    }
    aborted_.store(true, std::memory_order_release);
    self_.wake();
    // Kernels of an aborted communicator return, so the events waited on complete too.
    for (Handle *h : {&coll_, &up_, &down_}) {
        std::lock_guard<std::mutex> lock(h->mutex);
        if (h->comm) (void)api().ncclCommAbort(std::exchange(h->comm, nullptr));
    }
}

std::shared_ptr<void> NcclComm::capture_at_issue(const Call &call) { return capture_caller_position(call); }

void NcclComm::throw_if_aborted(const Call &call) {
    if (!aborted_.load(std::memory_order_acquire)) return;
    std::lock_guard<std::mutex> lock(abort_mutex_);
    throw Error(abort_code_, "nccl: " + describe(call) + " stopped: the communicator was aborted: " + abort_text_);
}

std::string NcclComm::timeout_text(const Call &call) const {
    return "nccl: " + describe(call) + " did not complete within " + std::to_string(timeout().count()) +
           " ms on rank " + std::to_string(rank()) + " of " + std::to_string(size()) +
           " (a rank never issued the matching call, or is stuck); the communicator is aborted (ncclCommAbort)";
}

void NcclComm::check_health_locked(Handle &handle, const Call &call) {
    throw_if_aborted(call);
    if (handle.comm) {
        ncclResult_t state = ncclSuccess;
        const ncclResult_t r = api().ncclCommGetAsyncError(handle.comm, &state);
        if (r != ncclSuccess) check(r, handle.comm, "nccl: " + describe(call) + ": ncclCommGetAsyncError");
        if (state != ncclSuccess && state != ncclInProgress)
            throw Error(error_code_for(state),
                        "nccl: " + describe(call) + ": " + describe_result(state, handle.comm, "asynchronously"));
    }
    peers_->check("nccl: " + describe(call));
}

void NcclComm::check_health(Handle &handle, const Call &call) {
    std::lock_guard<std::mutex> lock(handle.mutex);
    check_health_locked(handle, call);
}

void NcclComm::issue(Handle *handle, Lane &lane, const Call &call, const char *what, const Enqueue &enqueue) {
    const auto deadline = Clock::now() + timeout();
    {
        std::unique_lock<std::mutex> lock;
        if (handle) lock = std::unique_lock<std::mutex>(handle->mutex);
        throw_if_aborted(call);
        DeviceGuard guard(device());
        cudaStream_t stream = lane.stream ? lane.stream : this->stream();
        // Also at world size 1: NCCL's kernel on our own stream would otherwise overtake the
        // caller's cudaMemcpy into the same buffers (the first H100 run's avg failures from
        // 4 MiB on; NCCL 2.28.9's own one-rank avg is right, as torch.distributed showed).
        follow_caller(stream, issue_capture());
        ncclComm_t comm = handle ? handle->comm : nullptr;
        ncclResult_t r = enqueue(comm, stream);
        if (r == ncclInProgress && comm)
            r = wait_ready(comm, deadline, [&] { peers_->check("nccl: " + describe(call)); });
        if (r == ncclInProgress) throw Error(ErrorCode::timeout, timeout_text(call));
        check(r, comm, "nccl: " + describe(call) + ": " + what);
        cuda::detail::check(cudaEventRecord(lane.done, stream), "cudaEventRecord");
    }
    cuda::detail::wait_event(
        lane.done, deadline,
        [&] {
            if (handle)
                check_health(*handle, call);
            else {
                throw_if_aborted(call);
                peers_->check("nccl: " + describe(call));
            }
        },
        [&] { return timeout_text(call); });
}

void NcclComm::run(const Call &call) {
    switch (call.kind) {
    case CallKind::send: return run_send(call);
    case CallKind::recv: return run_recv(call);
    default: return run_collective(call);
    }
}

void NcclComm::run_collective(const Call &call) {
    // No data, nothing to agree on: NCCL would return at once too.
    if (call.kind != CallKind::barrier && call.count == 0) return;
    if (size() == 1 && call.kind != CallKind::barrier) return run_alone(call);
    const ncclDataType_t dt = to_nccl(call.dtype);
    const ncclRedOp_t op = to_nccl(call.op);
    const Call &c = call;
    switch (call.kind) {
    case CallKind::allreduce:
        return issue(&coll_, coll_lane_, call, "ncclAllReduce", [&](ncclComm_t comm, cudaStream_t s) {
            return api().ncclAllReduce(c.send, c.recv, c.count, dt, op, comm, s);
        });
    case CallKind::reduce_scatter:
        return issue(&coll_, coll_lane_, call, "ncclReduceScatter", [&](ncclComm_t comm, cudaStream_t s) {
            return api().ncclReduceScatter(c.send, c.recv, c.count, dt, op, comm, s);
        });
    case CallKind::allgather:
        return issue(&coll_, coll_lane_, call, "ncclAllGather", [&](ncclComm_t comm, cudaStream_t s) {
            return api().ncclAllGather(c.send, c.recv, c.count, dt, comm, s);
        });
    case CallKind::broadcast:
        return issue(&coll_, coll_lane_, call, "ncclBroadcast", [&](ncclComm_t comm, cudaStream_t s) {
            return api().ncclBroadcast(c.recv, c.recv, c.count, dt, c.root, comm, s);
        });
    case CallKind::reduce:
        return issue(&coll_, coll_lane_, call, "ncclReduce", [&](ncclComm_t comm, cudaStream_t s) {
            // Non-root ranks may pass no output; NCCL never writes theirs, but checks it.
            void *out = c.recv ? c.recv : const_cast<void *>(c.send);
            return api().ncclReduce(c.send, out, c.count, dt, op, c.root, comm, s);
        });
    case CallKind::barrier:
        // NCCL has no barrier: a one-word allreduce completes only when every rank issued it.
        return issue(&coll_, coll_lane_, call, "ncclAllReduce (barrier)", [&](ncclComm_t comm, cudaStream_t s) {
            return api().ncclAllReduce(barrier_word_.get(), barrier_word_.get(), 1, ncclInt32, ncclSum, comm, s);
        });
    default: throw Error(ErrorCode::internal, "nccl: unexpected call " + describe(call));
    }
}

void NcclComm::run_alone(const Call &call) {
    // One rank: every collective's result is its input (a reduction over one rank, avg included,
    // is the value itself), so it is a copy on the stream, none in place. Not NCCL's: NCCL 2.28.9
    // at one rank leaves an out-of-place ncclAvg's elements from 2^20 on unwritten (found by
    // gpu.conformance.nccl.ws1 on an H100; sum, min, max and prod were right).
    const std::size_t bytes = elements_bytes(call);
    const void *from = call.kind == CallKind::broadcast ? call.recv : call.send;
    issue(&coll_, coll_lane_, call, "cudaMemcpyAsync (one rank)", [&](ncclComm_t, cudaStream_t s) {
        if (from != call.recv)
            cuda::detail::check(cudaMemcpyAsync(call.recv, from, bytes, cudaMemcpyDeviceToDevice, s),
                                "cudaMemcpyAsync of a one-rank collective");
        return ncclSuccess;
    });
}

void NcclComm::run_send(const Call &call) {
    if (call.count == 0) return;
    const std::size_t bytes = elements_bytes(call);
    if (call.root == rank()) {
        cuda::detail::DeviceBuffer copy;
        {
            DeviceGuard guard(device());
            copy = cuda::detail::DeviceBuffer(bytes, "a message to self");
        }
        issue(nullptr, send_lane_, call, "cudaMemcpyAsync", [&](ncclComm_t, cudaStream_t s) {
            cuda::detail::check(cudaMemcpyAsync(copy.get(), call.send, bytes, cudaMemcpyDefault, s),
                                "cudaMemcpyAsync of a message to self");
            return ncclSuccess;
        });
        self_.post(call.tag, std::move(copy));
        return;
    }
    // Lower to higher rank on up_, higher to lower on down_ (see the header).
    Handle &handle = call.root > rank() ? up_ : down_;
    const ncclDataType_t dt = to_nccl(call.dtype);
    issue(&handle, send_lane_, call, "ncclSend", [&](ncclComm_t comm, cudaStream_t s) {
        return api().ncclSend(call.send, call.count, dt, call.root, comm, s);
    });
}

void NcclComm::run_recv(const Call &call) {
    if (call.count == 0) return;
    const std::size_t bytes = elements_bytes(call);
    if (call.root == rank()) {
        const auto deadline = Clock::now() + timeout();
        auto message = self_.take(call.tag, deadline, [&] { throw_if_aborted(call); },
                                  [&] { return timeout_text(call) + ": no send to self with this tag"; });
        if (message.bytes() != bytes)
            throw Error(ErrorCode::mismatch, "nccl: " + describe(call) + " from self: the matching send carried " +
                                                 std::to_string(message.bytes()) + " bytes, this receive expects " +
                                                 std::to_string(bytes));
        issue(nullptr, recv_lane_, call, "cudaMemcpyAsync", [&](ncclComm_t, cudaStream_t s) {
            cuda::detail::check(cudaMemcpyAsync(call.recv, message.get(), bytes, cudaMemcpyDefault, s),
                                "cudaMemcpyAsync of a message from self");
            return ncclSuccess;
        });
        return;
    }
    Handle &handle = call.root < rank() ? up_ : down_;
    const ncclDataType_t dt = to_nccl(call.dtype);
    issue(&handle, recv_lane_, call, "ncclRecv", [&](ncclComm_t comm, cudaStream_t s) {
        return api().ncclRecv(call.recv, call.count, dt, call.root, comm, s);
    });
}

CommunicatorPtr NcclComm::run_split(int color, int key) {
    Call call;
    call.kind = CallKind::split;
    call.root = color;
    call.tag = key;
    const auto deadline = Clock::now() + timeout();
    ncclComm_t child = nullptr;
    {
        std::lock_guard<std::mutex> lock(coll_.mutex);
        throw_if_aborted(call);
        DeviceGuard guard(device());
        child = split_comm(coll_.comm, color, key, deadline, [&] { peers_->check("nccl: " + describe(call)); });
    }
    if (!child) return nullptr;
    DeviceGuard guard(device());
    return std::make_shared<NcclComm>(peers_, device(), child, timeout());
}

} // namespace shardopt::nccl

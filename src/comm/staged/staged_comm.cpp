#include "staged_comm.hpp"

#include "comm/forward_call.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/cuda_device.hpp"

namespace shardopt::staged {

using cuda::detail::DeviceGuard;

StagedComm::StagedComm(CommunicatorPtr host, int device)
    : Communicator(host->rank(), host->size()), DeviceComm(device), host_(std::move(host)) {
    DeviceGuard guard(device);
    // Sends and receives on streams of their own: neither waits behind the other or behind a
    // collective. (A lane that throws here is released with the others by their destructors.)
    coll_.create(false);
    send_.create(true);
    recv_.create(true);
}

StagedComm::~StagedComm() {
    shutdown_queues();
    (void)cudaGetLastError(); // the lanes are released after this body
}

void StagedComm::on_abort(const std::string &reason, ErrorCode code) {
    {
        std::lock_guard<std::mutex> lock(abort_mutex_);
        abort_text_ = reason;
        abort_code_ = code == ErrorCode::ok ? ErrorCode::invalid_state : code;
    }
    aborted_.store(true, std::memory_order_release);
    // Wakes this rank's host operations and tells the peers (the UCX backend sends a notice).
    host_->abort(reason, code);
}

std::shared_ptr<void> StagedComm::capture_at_issue(const Call &call) { return capture_caller_position(call); }

void StagedComm::throw_if_aborted(const Call &call) {
    if (!aborted_.load(std::memory_order_acquire)) return;
    std::lock_guard<std::mutex> lock(abort_mutex_);
    throw Error(abort_code_, "staged: " + describe(call) + " stopped: the communicator was aborted: " + abort_text_);
}

void StagedComm::sync_timeout() {
    // Communicator::set_timeout is not virtual: the host learns a new timeout here, before use.
    std::lock_guard<std::mutex> lock(timeout_mutex_);
    if (host_->timeout() != timeout()) host_->set_timeout(timeout());
}

void StagedComm::copy(Lane &lane, void *dst, const void *src, std::size_t bytes, const Call &call, const char *what) {
    if (bytes == 0) return;
    const auto deadline = cuda::detail::Clock::now() + timeout();
    throw_if_aborted(call);
    {
        DeviceGuard guard(device());
        cudaStream_t stream = lane.stream ? lane.stream : this->stream();
        follow_caller(stream, issue_capture());
        cuda::detail::check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream),
                            ("staged: cudaMemcpyAsync " + std::string(what) + " for " + describe(call)).c_str());
        cuda::detail::check(cudaEventRecord(lane.done, stream), "cudaEventRecord");
    }
    cuda::detail::wait_event(lane.done, deadline, [&] { throw_if_aborted(call); },
                            [&] {
                                return "staged: " + describe(call) + ": copying " + what + " (" + std::to_string(bytes) +
                                       " bytes) did not finish within " + std::to_string(timeout().count()) +
                                       " ms (the device is stuck or busy)";
                            });
}

void StagedComm::run(const Call &call) {
    sync_timeout();
    const std::size_t bytes = call.count * dtype_size(call.dtype);
    Communicator &host = *host_;
    switch (call.kind) {
    case CallKind::barrier: return host.barrier();
    case CallKind::allreduce:
    case CallKind::reduce_scatter:
    case CallKind::allgather:
    case CallKind::broadcast:
    case CallKind::reduce: {
        const MovedBuffers m = moved_buffers(call, rank(), size());
        Lane &l = coll_;
        void *in = l.in.reserve(m.in_capacity);
        void *out = m.in_place ? in : l.out.reserve(m.out_capacity);
        copy(l, in, m.in_source, m.in_bytes, call, "the input to the host");
        Call on_host = call;
        on_host.send = in;
        on_host.recv = out;
        forward_call(host, on_host);
        return copy(l, call.recv, out, m.out_bytes, call, "the result to the device");
    }
    case CallKind::send: {
        void *in = send_.in.reserve(bytes);
        copy(send_, in, call.send, bytes, call, "the message to the host");
        return host.send(in, call.count, call.dtype, call.root, call.tag);
    }
    case CallKind::recv: {
        void *out = recv_.out.reserve(bytes);
        host.recv(out, call.count, call.dtype, call.root, call.tag);
        return copy(recv_, call.recv, out, bytes, call, "the message to the device");
    }
    case CallKind::split: break;
    }
    throw Error(ErrorCode::internal, "staged: unexpected call " + describe(call));
}

CommunicatorPtr StagedComm::run_split(int color, int key) {
    sync_timeout();
    auto child = host_->split(color, key);
    if (!child) return nullptr;
    return std::make_shared<StagedComm>(std::move(child), device());
}

} // namespace shardopt::staged

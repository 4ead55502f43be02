// NcclComm: a Communicator over NCCL for device buffers, one GPU per rank.
//
// Three NCCL communicators per shardopt communicator: one for collectives and two for point to
// point, one carrying messages from lower to higher ranks and one the other way. NCCL runs the
// kernels of one communicator one after another, so a receive posted first (recv_async) would
// otherwise hold back a later send and a ring of them would deadlock; with the split, a
// communicator's sends and receives wait only on the ranks that feed them. NCCL has no tags:
// messages between two ranks match in issue order (sends to self match by tag, see
// SelfMailbox).
//
// Every NCCL call on one ncclComm_t is made under that handle's mutex (NCCL communicators are
// not thread safe, and the front end runs collectives, sends and receives on three threads).
// Waits never hold a mutex except while NCCL itself reports ncclInProgress, which is bounded
// by the call's deadline. on_abort() calls ncclCommAbort on all three, which makes running
// kernels return; waiting threads then see the abort at their next check.
#pragma once

#include <nccl.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "comm/gpu/device_comm.hpp"
#include "comm/gpu/stream_lane.hpp"
#include "cuda/device_buffer.hpp"
#include "peer_watch.hpp"
#include "self_mailbox.hpp"
#include "shardopt/comm.hpp"

namespace shardopt::nccl {

class NcclComm final : public Communicator, public gpu::detail::DeviceComm {
  public:
    // Takes `comm` (initialized, non-blocking) and splits the point-to-point communicators off
    // it (collective over its ranks, bounded by `timeout`).
    NcclComm(std::shared_ptr<PeerWatch> peers, int device, ncclComm_t comm, Duration timeout);
    ~NcclComm() override;

    std::string backend_name() const override { return "nccl"; }

  protected:
    void run(const Call &call) override;
    CommunicatorPtr run_split(int color, int key) override;
    void on_abort(const std::string &reason, ErrorCode code) override;
    std::shared_ptr<void> capture_at_issue(const Call &call) override;

  private:
    struct Handle {
        std::mutex mutex;
        ncclComm_t comm = nullptr; // null once aborted or destroyed
    };
    // Where a call runs: its stream (null: the communicator's stream()) and completion event.
    using Lane = gpu::detail::StreamLane;
    using Enqueue = std::function<ncclResult_t(ncclComm_t, cudaStream_t)>;

    // Enqueues on the lane's stream (under the handle's mutex; handle null: a copy, no NCCL
    // call) and waits, bounded by the timeout, for completion with every check between polls.
    void issue(Handle *handle, Lane &lane, const Call &call, const char *what, const Enqueue &enqueue);
    void run_alone(const Call &call); // world size 1: the result is the input
    void run_collective(const Call &call);
    void run_send(const Call &call);
    void run_recv(const Call &call);
    // Throws the abort reason, NCCL's async error on `comm` or a lost peer (handle locked).
    void check_health_locked(Handle &handle, const Call &call);
    void check_health(Handle &handle, const Call &call);
    void throw_if_aborted(const Call &call);
    std::string timeout_text(const Call &call) const;
    // Finalizes (bounded by the timeout) and destroys; aborts when that fails.
    void close(Handle &handle) noexcept;

    std::shared_ptr<PeerWatch> peers_;
    Handle coll_, up_, down_; // up_/down_ stay null in a communicator of one
    Lane coll_lane_, send_lane_, recv_lane_;
    cuda::detail::DeviceBuffer barrier_word_;
    SelfMailbox self_;

    std::atomic<bool> aborted_{false};
    std::mutex abort_mutex_;
    std::string abort_text_;                          // under abort_mutex_
    ErrorCode abort_code_ = ErrorCode::invalid_state; // under abort_mutex_
};

// Splits `parent` (color < 0: no group, returns null), bounded by `deadline`; `check` runs
// between polls. The child is non-blocking like its parent.
ncclComm_t split_comm(ncclComm_t parent, int color, int key, cuda::detail::Clock::time_point deadline,
                      const std::function<void()> &check);

} // namespace shardopt::nccl

// StagedComm: a Communicator for device buffers that runs each operation on a host
// communicator (UCX) through pinned host memory: copy the input to the host, run the host
// collective, copy the result back. It is how several processes sharing one GPU (which NCCL
// refuses) and hosts without NCCL train on the GPU; it inherits the host backend's
// algorithms, reproducibility, mismatch checks and lost-peer detection.
//
// Each of the three call queues (collectives, sends, receives) has its own pinned buffers and
// event; copies of collectives run on stream() (after the caller's work there), sends and
// receives on streams of their own. A call's copies and its host operation are each bounded by
// timeout() (the host communicator is kept at the same timeout).
#pragma once

#include <atomic>
#include <mutex>
#include <string>

#include "comm/gpu/device_comm.hpp"
#include "cuda/event_wait.hpp"
#include "comm/gpu/stream_lane.hpp"
#include "cuda/pinned_buffer.hpp"
#include "shardopt/comm.hpp"

namespace shardopt::staged {

class StagedComm final : public Communicator, public gpu::detail::DeviceComm {
  public:
    StagedComm(CommunicatorPtr host, int device);
    ~StagedComm() override;

    std::string backend_name() const override { return "staged"; }
    std::uint64_t bytes_sent() const noexcept override { return host_->bytes_sent(); } // its calls run on host_

  protected:
    void run(const Call &call) override;
    CommunicatorPtr run_split(int color, int key) override;
    void on_abort(const std::string &reason, ErrorCode code) override;
    std::shared_ptr<void> capture_at_issue(const Call &call) override;

  private:
    struct Lane : gpu::detail::StreamLane {
        cuda::detail::PinnedBuffer in, out;
    };
    // Copies bytes (any direction; cudaMemcpyDefault) on the lane's stream and waits for it.
    void copy(Lane &lane, void *dst, const void *src, std::size_t bytes, const Call &call, const char *what);
    void throw_if_aborted(const Call &call);
    void sync_timeout();

    CommunicatorPtr host_;
    Lane coll_, send_, recv_;
    std::mutex timeout_mutex_;
    std::atomic<bool> aborted_{false};
    std::mutex abort_mutex_;
    std::string abort_text_;                          // under abort_mutex_
    ErrorCode abort_code_ = ErrorCode::invalid_state; // under abort_mutex_
};

} // namespace shardopt::staged

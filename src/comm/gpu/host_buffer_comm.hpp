// HostBufferComm: a Communicator for HOST buffers over a GPU communicator (nccl, staged, or one
// split from one), which takes device buffers only. It is how the device engine runs its few
// collectives on host data (checkpoint agreement and gathers, the serialized bytes,
// synchronize_optimizer_state's agreement and state): each call's input travels host ->
// pinned -> device, the same collective runs on the GPU communicator, and the output comes
// back the same way. The reverse of staged::StagedComm (device buffers over a host
// communicator).
//
// The copies run on the GPU communicator's stream, so its collective (enqueued there) follows
// them; every wait is a polled event bounded by the GPU communicator's timeout. Every
// collective of Communicator works, with every dtype and op; point to point does not
// (Error(unsupported)). A failed call aborts the GPU communicator too, as any backend's
// failure does. Built only with CUDA (Space::host_access of the CUDA space).
#pragma once

#include <string>

#include "stream_lane.hpp"
#include "cuda/pinned_buffer.hpp"
#include "cuda/device_buffer.hpp"
#include "shardopt/comm.hpp"

namespace shardopt::gpu::detail {

class HostBufferComm final : public Communicator {
  public:
    explicit HostBufferComm(CommunicatorPtr device_comm);
    ~HostBufferComm() override;

    std::uint64_t bytes_sent() const noexcept override { return device_->bytes_sent(); } // what the calls forwarded moved
    std::string backend_name() const override { return device_->backend_name() + "+host-buffers"; }

  protected:
    void run(const Call &call) override;
    CommunicatorPtr run_split(int color, int key) override;
    void on_abort(const std::string &reason, ErrorCode code) override;

  private:
    void *reserve(cuda::detail::DeviceBuffer &buffer, std::size_t bytes, const char *what);
    // Waits (bounded) until the work enqueued on `stream` so far has completed.
    void wait(cudaStream_t stream, const Call &call, const char *what);

    CommunicatorPtr device_;
    int gpu_;
    StreamLane lane_; // its done event (the stream is the GPU communicator's)
    cuda::detail::PinnedBuffer pinned_;  // host side of the input, then of the output
    cuda::detail::DeviceBuffer in_, out_;
};

} // namespace shardopt::gpu::detail

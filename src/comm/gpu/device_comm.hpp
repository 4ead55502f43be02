// DeviceComm: what a GPU communicator (nccl, staged) adds to Communicator, so the public
// accessors in gpu_comm.hpp can reach it through a plain CommunicatorPtr.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <mutex>
#include <vector>

#include "shardopt/gpu_comm.hpp"

namespace shardopt::gpu::detail {

class DeviceComm {
  public:
    virtual ~DeviceComm();
    DeviceComm(const DeviceComm &) = delete;
    DeviceComm &operator=(const DeviceComm &) = delete;
    int device() const noexcept { return device_; }
    // The stream collectives are enqueued on: the caller's when set, else the owned one.
    cudaStream_t stream() const;
    void set_stream(cudaStream_t stream);
    // The caller's stream when set_stream() gave one, else null.
    cudaStream_t user_stream() const;
    // The caller's stream: the one set_stream() gave, else the legacy default stream (where
    // cudaMemcpy, cudaMemset and kernels launched without a stream go).
    cudaStream_t caller_stream() const;
    // What both GPU communicators' Communicator::capture_at_issue return, on the issuing thread:
    // for a call that touches the caller's device buffers, an event recorded on the caller's
    // stream now, marking the work the caller enqueued before the call; null for the others
    // (barrier, split, no elements), which follow nothing of the caller's.
    std::shared_ptr<void> capture_caller_position(const Call &call) const;
    // Orders `stream`, where a call's device work is about to be enqueued, after `capture`
    // (Communicator::issue_capture(): capture_caller_position's event, or null: nothing to
    // follow). Without this, a call on the owned non-blocking stream overtakes the caller's
    // cudaMemcpy from pageable memory, which returns before its last bytes reach the device (the
    // first GPU run's in-place and avg failures); and with a position taken when the call runs
    // instead of when it was issued, an async call would wait for work the caller enqueued after
    // it (no overlap).
    void follow_caller(cudaStream_t stream, const std::shared_ptr<void> &capture) const;

  protected:
    // Creates the owned stream on `device` (non-blocking: the legacy stream never waits for
    // it; it waits for the legacy stream only through follow_caller).
    explicit DeviceComm(int device);
  private:
    int device_;
    cudaStream_t own_ = nullptr;
    mutable std::mutex mutex_;
    cudaStream_t user_ = nullptr; // under mutex_
    // Events of finished captures, reused: creating one per call would cost every small
    // collective a few microseconds. A stream wait enqueued on an event is not affected by the
    // event's later records, so an event is free again once its capture is released.
    mutable std::mutex events_mutex_;
    mutable std::vector<cudaEvent_t> free_events_; // under events_mutex_
};

// The ordinal for `requested` (see GpuCommOptions::device), or an Error naming the backend
// ("backend 'nccl': no CUDA device can be used: ...") and why.
int pick_device(int requested, int local_rank, const char *backend);

} // namespace shardopt::gpu::detail

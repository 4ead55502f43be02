// DeviceAdapter: runs the conformance suite (written for host buffers) on a GPU communicator.
// A Communicator decorator for tests only: each call copies the case's host inputs into fresh
// device memory, runs the same call on the device communicator, and copies the outputs back.
// In-place calls stay in place on the device (one device block mirrors the enclosing host range).
// The copies are plain cudaMemcpy on the legacy default stream, as a user's would be: from
// pageable memory it returns before the bytes reach the device, so the cases also check that
// the GPU communicators order their work after the caller's legacy-stream work.
#pragma once

#include <mutex>

#include "shardopt/comm.hpp"

namespace gpu_test {

class DeviceAdapter final : public shardopt::Communicator {
  public:
    explicit DeviceAdapter(shardopt::CommunicatorPtr device_comm);
    ~DeviceAdapter() override;
    std::uint64_t bytes_sent() const noexcept override { return device_->bytes_sent(); } // what the calls forwarded moved
    std::string backend_name() const override { return device_->backend_name() + "+host-adapter"; }

  protected:
    void run(const shardopt::Call &call) override;
    shardopt::CommunicatorPtr run_split(int color, int key) override;
    void on_abort(const std::string &reason, shardopt::ErrorCode code) override;

  private:
    void sync_timeout();
    shardopt::CommunicatorPtr device_;
    std::mutex timeout_mutex_;
};

} // namespace gpu_test

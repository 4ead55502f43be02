// Event: a CUDA event that only orders and signals (no timing: cheaper to record and to wait
// for), the handle of every bounded wait on a stream (cuda::detail::wait_event polls it, since
// cudaStreamSynchronize and cudaEventSynchronize cannot be bounded). Created and destroyed
// explicitly, so the owner can do both under its DeviceGuard.
#pragma once

#include <cuda_runtime_api.h>

#include "cuda_check.hpp"

namespace shardopt::cuda::detail {

class Event {
  public:
    Event() = default;
    ~Event() { destroy(); }
    Event(const Event &) = delete;
    Event &operator=(const Event &) = delete;

    void create() { check(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), "cudaEventCreateWithFlags"); }
    // A pending event may be destroyed: CUDA releases it once it completes.
    void destroy() noexcept {
        if (event_ != nullptr && cudaEventDestroy(event_) != cudaSuccess) (void)cudaGetLastError();
        event_ = nullptr;
    }
    cudaEvent_t get() const noexcept { return event_; }

  private:
    cudaEvent_t event_ = nullptr;
};

} // namespace shardopt::cuda::detail

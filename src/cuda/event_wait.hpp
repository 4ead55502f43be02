// wait_event: the one way the library waits for the device (GPU communicators, the CUDA
// optimizer, the device engine's CUDA space). Polls a CUDA event (never cudaEventSynchronize,
// which cannot be bounded) and runs the caller's checks between polls, so a timeout, an NCCL
// async error, a lost peer or an abort ends the wait instead of a hang.
#pragma once

#include <cuda_runtime_api.h>

#include <chrono>
#include <functional>
#include <string>

namespace shardopt::cuda::detail {

using Clock = std::chrono::steady_clock;

// Returns once `event` completed. Throws: what `check` throws (called between polls); the CUDA
// error of a failed operation; Error(timeout, timeout_text()) when `deadline` passes first.
void wait_event(cudaEvent_t event, Clock::time_point deadline, const std::function<void()> &check,
                const std::function<std::string()> &timeout_text);

// Sleeps a little longer on each call, from a yield up to 1 ms: short operations finish with
// little latency, long ones cost no core (the host may be shared by several ranks).
class Backoff {
  public:
    void pause();

  private:
    int round_ = 0;
};

} // namespace shardopt::cuda::detail

#include "event_wait.hpp"

#include <sched.h>

#include <thread>

#include "cuda_check.hpp"
#include "shardopt/error.hpp"

namespace shardopt::cuda::detail {

void Backoff::pause() {
    if (round_ < 32) {
        ++round_;
        sched_yield();
        return;
    }
    const int us = round_ < 32 + 10 ? 1 << (round_++ - 32) : 1000; // 1 us doubling to ~1 ms
    std::this_thread::sleep_for(std::chrono::microseconds(us));
}

void wait_event(cudaEvent_t event, Clock::time_point deadline, const std::function<void()> &check,
                const std::function<std::string()> &timeout_text) {
    Backoff backoff;
    for (;;) {
        const cudaError_t status = cudaEventQuery(event);
        if (status == cudaSuccess) return;
        if (status != cudaErrorNotReady) cuda::detail::check(status, "cudaEventQuery (a device operation failed)");
        if (check) check();
        if (Clock::now() >= deadline) throw Error(ErrorCode::timeout, timeout_text());
        backoff.pause();
    }
}

} // namespace shardopt::cuda::detail

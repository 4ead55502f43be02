// SelfMailbox: sends a rank addresses to itself. NCCL only pairs a send and a receive to self
// inside one group call, but the Communicator issues them from different threads at different
// times (recv_async, then send); so a send to self copies its data into a device buffer held
// here until the receive with the same tag takes it.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "cuda/event_wait.hpp"
#include "cuda/device_buffer.hpp"

namespace shardopt::nccl {

class SelfMailbox {
  public:
    void post(int tag, cuda::detail::DeviceBuffer message);
    // The oldest message with `tag`. Between waits runs `check` (which may throw); throws
    // Error(timeout, timeout_text()) when `deadline` passes first.
    cuda::detail::DeviceBuffer take(int tag, cuda::detail::Clock::time_point deadline, const std::function<void()> &check,
                                    const std::function<std::string()> &timeout_text);
    // Wakes a waiting take() so that it runs its check now (on abort).
    void wake();

  private:
    std::mutex mutex_;
    std::condition_variable cv_;
    std::map<int, std::deque<cuda::detail::DeviceBuffer>> messages_;
};

} // namespace shardopt::nccl

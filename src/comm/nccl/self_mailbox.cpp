#include "self_mailbox.hpp"

#include "shardopt/error.hpp"

namespace shardopt::nccl {

void SelfMailbox::post(int tag, cuda::detail::DeviceBuffer message) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        messages_[tag].push_back(std::move(message));
    }
    cv_.notify_all();
}

cuda::detail::DeviceBuffer SelfMailbox::take(int tag, cuda::detail::Clock::time_point deadline,
                                             const std::function<void()> &check,
                                             const std::function<std::string()> &timeout_text) {
    for (;;) {
        {
            std::unique_lock<std::mutex> lock(mutex_);
            auto it = messages_.find(tag);
            if (it != messages_.end() && !it->second.empty()) {
                auto message = std::move(it->second.front());
                it->second.pop_front();
                return message;
            }
            // Bounded slices: the check below must run even when nobody notifies.
            cv_.wait_for(lock, std::chrono::milliseconds(5));
        }
        if (check) check();
        if (cuda::detail::Clock::now() >= deadline) throw Error(ErrorCode::timeout, timeout_text());
    }
}

void SelfMailbox::wake() { cv_.notify_all(); }

} // namespace shardopt::nccl

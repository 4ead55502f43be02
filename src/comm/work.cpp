#include "shardopt/work.hpp"

namespace shardopt {

void Work::wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    done_cv_.wait(lock, [&] { return done_; });
    if (error_) std::rethrow_exception(error_);
}

bool Work::test() {
    std::lock_guard<std::mutex> lock(mutex_);
    return done_;
}

void Work::complete(std::exception_ptr error) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        done_ = true;
        error_ = error;
    }
    done_cv_.notify_all();
}

} // namespace shardopt

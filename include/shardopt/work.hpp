// Work: the handle an asynchronous collective returns (wait / test), as in c10d.
#pragma once

#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>

namespace shardopt {

class Work {
  public:
    Work() = default;
    Work(const Work &) = delete;
    Work &operator=(const Work &) = delete;

    // Blocks until the operation finished; rethrows its error (every operation has its own
    // timeout, so this returns). Calling wait() again returns (or throws) the same result.
    void wait();
    // True once the operation finished (successfully or not); never blocks.
    bool test();

    // Backend side: mark the operation finished, with the error it raised (or none).
    void complete(std::exception_ptr error = nullptr);

  private:
    std::mutex mutex_;
    std::condition_variable done_cv_;
    bool done_ = false;
    std::exception_ptr error_;
};

using WorkPtr = std::shared_ptr<Work>;

} // namespace shardopt

// CallQueue: runs a communicator's calls one at a time, in issue order. Asynchronous calls go
// to a worker thread started on first use; a blocking call issued while nothing is queued runs
// inline on the caller's thread, so small blocking collectives pay no thread hand-off.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "shardopt/work.hpp"

namespace shardopt {

class CallQueue {
  public:
    using Job = std::function<void()>;
    CallQueue() = default;
    ~CallQueue();
    CallQueue(const CallQueue &) = delete;
    CallQueue &operator=(const CallQueue &) = delete;

    // Runs job after everything issued before it; the returned Work completes with its error.
    WorkPtr enqueue(Job job);
    // Runs job after everything issued before it and returns when it finished (rethrowing).
    void run_in_order(const Job &job);
    // True when no job is running or waiting.
    bool idle();

  private:
    struct Entry {
        Job job;
        WorkPtr work;
    };
    void worker_loop();

    std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<Entry> pending_;
    bool busy_ = false; // a job is running (worker or inline)
    bool stopping_ = false;
    std::thread worker_;
};

} // namespace shardopt

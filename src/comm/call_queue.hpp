// CallQueue: runs a communicator's calls one at a time, in issue order. Asynchronous calls go
// to a worker thread started on first use; a blocking call issued while nothing is queued runs
// inline on the caller's thread, so small blocking collectives pay no thread hand-off.
//
// Who runs is decided by one atomic word (state_): bit 0 is set while a job runs (inline or on
// the worker), the bits above count the jobs queued and not yet started. A blocking call with
// the word at 0 claims it with one compare-and-swap and releases it with one atomic subtraction,
// taking no lock (an 8-byte allreduce takes a few hundred nanoseconds, and four lock/unlock
// pairs were a tenth of that); only when jobs are queued does the release lock the mutex, to
// wake the worker.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
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
    static constexpr std::uint64_t kRunning = 1, kOneQueued = 2;
    void worker_loop();
    // Clears the running bit; wakes the worker when jobs are queued.
    void release();

    std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<Entry> pending_;          // under mutex_
    std::atomic<std::uint64_t> state_{0}; // running bit + kOneQueued x queued jobs (see above)
    bool stopping_ = false;
    std::thread worker_;
};

} // namespace shardopt

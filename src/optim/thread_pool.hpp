// A small fixed-size pool of worker threads for data-parallel loops: run(n, task) calls
// task(0) .. task(n-1) once each, task 0 on the calling thread, and returns when all are done.
// Workers sleep on a condition variable between runs. One run at a time per pool (the caller
// blocks), so a pool belongs to one owner (one ShardedOptimizer, one benchmark).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace shardopt {

class ThreadPool {
  public:
    // threads counts the calling thread: ThreadPool(4) starts 3 workers; ThreadPool(1) none.
    explicit ThreadPool(int threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool &) = delete;
    ThreadPool &operator=(const ThreadPool &) = delete;

    int size() const noexcept { return int(workers_.size()) + 1; }
    // Runs task(i) for i in [0, tasks), tasks <= size(). Rethrows the exception of the lowest
    // task index that threw, after every task has finished.
    void run(int tasks, const std::function<void(int)> &task);

  private:
    void worker_loop(int index);

    std::vector<std::thread> workers_;
    std::mutex mutex_;
    std::condition_variable start_, done_;
    const std::function<void(int)> *task_ = nullptr;
    int tasks_ = 0;
    int pending_ = 0;
    std::uint64_t generation_ = 0;
    bool stop_ = false;
    std::vector<std::exception_ptr> errors_;
};

} // namespace shardopt

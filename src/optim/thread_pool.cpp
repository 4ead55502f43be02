#include "thread_pool.hpp"

#include "shardopt/error.hpp"

namespace shardopt {

ThreadPool::ThreadPool(int threads) {
    require(threads >= 1, ErrorCode::invalid_argument, "a thread pool needs at least 1 thread");
    errors_.resize(std::size_t(threads));
    workers_.reserve(std::size_t(threads - 1));
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
    }
    start_.notify_all();
    for (auto &w : workers_) w.join();
}

void ThreadPool::run(int tasks, const std::function<void(int)> &task) {
    require(tasks >= 0 && tasks <= size(), ErrorCode::invalid_argument, "more tasks than pool threads");
    if (tasks == 0) return;
    for (auto &e : errors_) e = nullptr;
    if (tasks > 1) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            task_ = &task;
            tasks_ = tasks;
            pending_ = tasks - 1;
            ++generation_;
        }
        start_.notify_all();
    }
    try {
        task(0);
    } catch (...) {
        errors_[0] = std::current_exception();
    }
    if (tasks > 1) {
        std::unique_lock<std::mutex> lock(mutex_);
        done_.wait(lock, [this] { return pending_ == 0; });
        task_ = nullptr;
    }
    for (auto &e : errors_)
        if (e) std::rethrow_exception(e);
}

void ThreadPool::worker_loop(int index) {
    std::uint64_t seen = 0;
    for (;;) {
        const std::function<void(int)> *task = nullptr;
        {
            std::unique_lock<std::mutex> lock(mutex_);
            start_.wait(lock, [&] { return stop_ || generation_ != seen; });
            if (stop_) return;
            seen = generation_;
            if (index >= tasks_) continue; // not needed in this run
            task = task_;
        }
        try {
            (*task)(index);
        } catch (...) {
            errors_[std::size_t(index)] = std::current_exception();
        }
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (--pending_ == 0) done_.notify_one();
        }
    }
}

} // namespace shardopt

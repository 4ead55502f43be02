#include "call_queue.hpp"

#include "shardopt/error.hpp"

namespace shardopt {

CallQueue::~CallQueue() {
    std::deque<Entry> orphans;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stopping_ = true;
        orphans.swap(pending_);
    }
    cv_.notify_all();
    if (worker_.joinable()) worker_.join();
    for (auto &entry : orphans)
        entry.work->complete(std::make_exception_ptr(
            Error(ErrorCode::invalid_state, "communicator destroyed before the operation ran")));
}

bool CallQueue::idle() {
    std::lock_guard<std::mutex> lock(mutex_);
    return !busy_ && pending_.empty();
}

WorkPtr CallQueue::enqueue(Job job) {
    auto work = std::make_shared<Work>();
    {
        std::lock_guard<std::mutex> lock(mutex_);
        pending_.push_back(Entry{std::move(job), work});
        if (!worker_.joinable()) worker_ = std::thread([this] { worker_loop(); });
    }
    cv_.notify_all();
    return work;
}

void CallQueue::run_in_order(const Job &job) {
    {
        std::unique_lock<std::mutex> lock(mutex_);
        if (!pending_.empty() || busy_) {
            lock.unlock();
            auto work = enqueue(job);
            work->wait();
            return;
        }
        busy_ = true;
    }
    struct Release {
        CallQueue *queue;
        ~Release() {
            std::lock_guard<std::mutex> lock(queue->mutex_);
            queue->busy_ = false;
            queue->cv_.notify_all();
        }
    } release{this};
    job();
}

void CallQueue::worker_loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
        cv_.wait(lock, [&] { return stopping_ || (!pending_.empty() && !busy_); });
        if (stopping_) return;
        Entry entry = std::move(pending_.front());
        pending_.pop_front();
        busy_ = true;
        lock.unlock();
        std::exception_ptr error;
        try {
            entry.job();
        } catch (...) {
            error = std::current_exception();
        }
        // Idle before the waiter wakes: once wait() returns, the queue holds nothing of that call.
        lock.lock();
        busy_ = false;
        cv_.notify_all();
        lock.unlock();
        entry.work->complete(error);
        lock.lock();
    }
}

} // namespace shardopt

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

bool CallQueue::idle() { return state_.load(std::memory_order_acquire) == 0; }

WorkPtr CallQueue::enqueue(Job job) {
    auto work = std::make_shared<Work>();
    {
        std::lock_guard<std::mutex> lock(mutex_);
        pending_.push_back(Entry{std::move(job), work});
        state_.fetch_add(kOneQueued, std::memory_order_acq_rel);
        if (!worker_.joinable()) worker_ = std::thread([this] { worker_loop(); });
    }
    cv_.notify_all();
    return work;
}

void CallQueue::release() {
    // Jobs queued meanwhile: the worker waits for the running bit under the mutex, so taking
    // it here before notifying cannot miss the worker between its check and its wait.
    if (state_.fetch_sub(kRunning, std::memory_order_acq_rel) != kRunning) {
        std::lock_guard<std::mutex> lock(mutex_);
        cv_.notify_all();
    }
}

void CallQueue::run_in_order(const Job &job) {
    std::uint64_t idle_state = 0;
    if (!state_.compare_exchange_strong(idle_state, kRunning, std::memory_order_acq_rel)) {
        // Something runs or waits: take a place in the queue behind it.
        enqueue(job)->wait();
        return;
    }
    struct Release {
        CallQueue *queue;
        ~Release() { queue->release(); }
    } release{this};
    job();
}

void CallQueue::worker_loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
        // Claims the running bit for the oldest queued job (one queued job becomes the running one).
        cv_.wait(lock, [&] {
            if (stopping_) return true;
            if (pending_.empty()) return false;
            std::uint64_t s = state_.load(std::memory_order_acquire);
            while (!(s & kRunning))
                if (state_.compare_exchange_weak(s, s - kOneQueued + kRunning, std::memory_order_acq_rel)) return true;
            return false;
        });
        if (stopping_) return;
        Entry entry = std::move(pending_.front());
        pending_.pop_front();
        lock.unlock();
        std::exception_ptr error;
        try {
            entry.job();
        } catch (...) {
            error = std::current_exception();
        }
        // Idle before the waiter wakes: once wait() returns, the queue holds nothing of that call.
        state_.fetch_sub(kRunning, std::memory_order_acq_rel);
        entry.work->complete(error);
        lock.lock();
    }
}

} // namespace shardopt

#include "stream_engine.hpp"

#include <algorithm>
#include <cstdlib>
#include <random>
#include <thread>

#include <cuda_runtime_api.h>

namespace cuda_standin {

struct Stream::Op {
    std::function<void()> work;
    std::vector<Dependency> deps;
    Clock::time_point not_before;
};

namespace {

// Never destroyed: worker threads may still run while the process exits.
struct Registry {
    std::mutex mutex;
    std::condition_variable changed;
    std::vector<Stream *> streams; // live (not yet destroyed by the caller)
    Stream *legacy = nullptr;
};

Registry &registry() {
    static Registry *r = new Registry();
    return *r;
}

Clock::duration base_delay() {
    static const Clock::duration delay = [] {
        const char *text = std::getenv("SHARDOPT_CUDA_STANDIN_DELAY_US");
        const long us = text ? std::strtol(text, nullptr, 10) : 200;
        return std::chrono::duration_cast<Clock::duration>(std::chrono::microseconds(std::max(0L, us)));
    }();
    return delay;
}

} // namespace

std::mutex &engine_mutex() { return registry().mutex; }
std::condition_variable &engine_changed() { return registry().changed; }

Clock::duration operation_delay() {
    const Clock::duration base = base_delay();
    if (base == Clock::duration::zero()) return base;
    thread_local std::minstd_rand rng(std::random_device{}());
    std::uniform_int_distribution<int64_t> jitter(0, base.count());
    return base + Clock::duration(jitter(rng));
}

Stream::Stream(bool blocking, bool legacy) : blocking_(blocking), legacy_(legacy) {
    std::thread([this] { worker(); }).detach();
}

bool dependency_met(const Dependency &dep) { return dep.stream == nullptr || dep.stream->completed_ >= dep.seq; }

uint64_t Stream::enqueue(std::function<void()> work, std::vector<Dependency> deps, Clock::duration extra_delay) {
    auto *op = new Op{std::move(work), std::move(deps), Clock::now() + operation_delay() + extra_delay};
    std::lock_guard<std::mutex> lock(engine_mutex());
    // CUDA's implicit synchronization with the legacy default stream.
    if (legacy_) {
        for (Stream *s : registry().streams)
            if (s != this && s->blocking_ && s->enqueued_ > 0) op->deps.push_back({s, s->enqueued_});
    } else if (blocking_) {
        Stream *legacy = legacy_stream();
        if (legacy->enqueued_ > 0) op->deps.push_back({legacy, legacy->enqueued_});
    }
    queue_.push_back(op);
    const uint64_t seq = ++enqueued_;
    engine_changed().notify_all();
    return seq;
}

uint64_t Stream::enqueued() const {
    std::lock_guard<std::mutex> lock(engine_mutex());
    return enqueued_;
}

uint64_t Stream::completed() const {
    std::lock_guard<std::mutex> lock(engine_mutex());
    return completed_;
}

void Stream::wait_for(uint64_t seq) const {
    std::unique_lock<std::mutex> lock(engine_mutex());
    engine_changed().wait(lock, [&] { return completed_ >= seq; });
}

void Stream::close() {
    std::lock_guard<std::mutex> lock(engine_mutex());
    closing_ = true;
    engine_changed().notify_all();
}

void Stream::worker() {
    std::unique_lock<std::mutex> lock(engine_mutex());
    for (;;) {
        if (queue_.empty()) {
            if (closing_) return; // the Stream itself is never freed: handles stay distinguishable
            engine_changed().wait(lock);
            continue;
        }
        Op *op = queue_.front();
        const bool deps_met = std::all_of(op->deps.begin(), op->deps.end(), dependency_met);
        if (!deps_met) {
            engine_changed().wait(lock);
            continue;
        }
        if (Clock::now() < op->not_before) {
            engine_changed().wait_until(lock, op->not_before);
            continue;
        }
        queue_.erase(queue_.begin());
        lock.unlock();
        op->work();
        delete op;
        lock.lock();
        ++completed_;
        engine_changed().notify_all();
    }
}

Stream *legacy_stream() {
    Registry &r = registry();
    if (!r.legacy) r.legacy = new Stream(true, true); // callers hold the engine mutex
    return r.legacy;
}

Stream *stream_of(void *handle) {
    if (handle == nullptr || handle == static_cast<void *>(cudaStreamLegacy)) return legacy_stream();
    Registry &r = registry();
    auto it = std::find(r.streams.begin(), r.streams.end(), static_cast<Stream *>(handle));
    return it == r.streams.end() ? nullptr : *it;
}

void register_stream(Stream *stream) { registry().streams.push_back(stream); }

void forget_stream(Stream *stream) {
    auto &streams = registry().streams;
    streams.erase(std::remove(streams.begin(), streams.end(), stream), streams.end());
}

std::vector<Stream *> all_streams() {
    std::vector<Stream *> streams = registry().streams;
    streams.push_back(legacy_stream());
    return streams;
}

} // namespace cuda_standin

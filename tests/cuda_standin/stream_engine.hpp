// The stand-in's execution model of CUDA streams: every stream is a queue of operations run in
// order by a worker thread of its own, each operation no earlier than a delay after the call
// that enqueued it. So work on the device happens later than the host call, as on a GPU, and a
// caller that reads a buffer before waiting for the copy that fills it reads stale bytes.
//
// Ordering follows CUDA's rules:
// - operations of one stream run in order;
// - the legacy default stream (0, cudaStreamLegacy) waits for all earlier work of every blocking
//   stream, and a blocking stream (created without cudaStreamNonBlocking) waits for all earlier
//   work of the legacy stream; non-blocking streams wait for nothing implicitly;
// - an event marks a point of one stream; cudaStreamWaitEvent makes another stream wait for it.
//
// All state is under one mutex (a test tool: simple beats fast); operations run outside it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace cuda_standin {

using Clock = std::chrono::steady_clock;

class Stream;

// "Wait until `stream` has completed `seq` operations."
struct Dependency {
    Stream *stream = nullptr;
    uint64_t seq = 0;
};

struct Event {
    bool timing = true;
    bool recorded = false;
    Dependency point; // the operation that completes the event
    std::shared_ptr<Clock::time_point> stamp; // set by that operation (cudaEventElapsedTime)
};

class Stream {
  public:
    Stream(bool blocking, bool legacy);

    bool blocking() const { return blocking_; }
    bool legacy() const { return legacy_; }

    // Enqueues `work` (with extra dependencies, and an extra delay beyond the usual one) and
    // returns its sequence number: the stream has completed it once completed() >= that.
    uint64_t enqueue(std::function<void()> work, std::vector<Dependency> deps = {},
                     Clock::duration extra_delay = Clock::duration::zero());
    // The sequence number of the last operation enqueued so far (0: none).
    uint64_t enqueued() const;
    uint64_t completed() const;
    // Blocks until the stream completed `seq` (no timeout: the stand-in's work always ends).
    void wait_for(uint64_t seq) const;
    // cudaStreamDestroy: pending work still completes; the worker then ends.
    void close();

  private:
    friend bool dependency_met(const Dependency &dep);
    struct Op;
    void worker();

    const bool blocking_, legacy_;
    bool closing_ = false;                // under the engine mutex
    std::vector<Op *> queue_;             // under the engine mutex, FIFO
    uint64_t enqueued_ = 0, completed_ = 0; // under the engine mutex
};

// The engine's one mutex and condition variable (every state change notifies all).
std::mutex &engine_mutex();
std::condition_variable &engine_changed();

// Streams by handle: null and cudaStreamLegacy name the legacy stream. Null for a handle that
// is not a live stream of the stand-in.
Stream *legacy_stream();
Stream *stream_of(void *handle);
void register_stream(Stream *stream);
void forget_stream(Stream *stream);
// Every live stream (cudaDeviceSynchronize waits for all of them).
std::vector<Stream *> all_streams();

bool dependency_met(const Dependency &dep); // under the engine mutex

// The delay every operation waits after it was enqueued (SHARDOPT_CUDA_STANDIN_DELAY_US,
// default 200 us, with up to as much again of jitter so streams interleave differently).
Clock::duration operation_delay();

} // namespace cuda_standin

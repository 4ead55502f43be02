// Session: one epoch of asynchronous training on this rank (shardopt/async_sgd.hpp has the rules).
//
// Threads. The caller's thread is the worker: push() sends shard k of its gradient to owner k and
// tells rank 0; receive() takes the version the owners hand it. A server thread is the owner of
// this rank's shard: on rank 0 it is also the clock keeper (ClockKeeper), which decides, and
// sends each decision to the other owners before executing it itself; on the other ranks it
// executes rank 0's decisions in the order sent. Rank 0 has a receiver thread per other worker,
// which takes that worker's notices (armed only while a notice is due) into the keeper's queue.
//
// Failures. Every blocking wait is bounded by the channels' timeout. The first failure on this
// rank (of any of its threads) is kept; it aborts the channels and the world communicator, which
// wakes every blocked thread here and tells the peers, and it is what the worker side throws.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "async_state.hpp"
#include "clock_keeper.hpp"
#include "wire.hpp"

namespace shardopt::async {

class Session {
  public:
    // Starts this rank's threads for a session of clock_samples.size() clocks (same on every rank),
    // clock c being the optimizer's step first_step + c of epoch `epoch` (from 0). before_update(c),
    // when given, runs on the server thread before clock c's update is applied (a per-step rate).
    Session(AsyncSgdOptimizer::State &state, std::vector<std::int64_t> clock_samples, int epoch,
            std::int64_t first_step, std::function<void(std::int64_t clock)> before_update);
    ~Session();
    Session(const Session &) = delete;
    Session &operator=(const Session &) = delete;

    // A version handed to this rank's worker.
    struct Handed {
        std::int64_t version = 0;
        std::int64_t label = 0; // the next step's label; clocks() when the session is over for it
        ReplyHeader account;    // rank 0's reply: the session's account once it is over
    };

    std::int64_t clocks() const noexcept { return std::int64_t(clock_samples_.size()); }
    // The step labelled `label`, computed on `version` with (slice-weighted) `loss`: its gradient
    // (full padded) goes to the owners, then the notice to rank 0.
    void push(std::int64_t label, std::int64_t version, double loss, const unsigned char *padded_grad);
    // Waits for every owner's shard of the version handed to this worker; writes them into the view.
    Handed receive();
    // After the worker's last receive(): waits for the server side and returns the updates it
    // applied. Rethrows the session's first failure.
    std::int64_t finish();
    // From a catch block of the worker side: records the exception being handled (unless an
    // earlier failure is kept), stops everything and throws the first failure.
    [[noreturn]] void fail();

  private:
    struct Receiver {
        std::thread thread;
        bool armed = false;
    };
    void server_main();
    void keeper_loop();
    void follower_loop();
    void receiver_main(int worker);
    void arm(int worker);
    // The next notice in the keeper's queue (waits up to the timeout).
    PushNotice take_notice(const ClockKeeper &keeper);
    void deliver(const PushNotice &notice);
    // Owner side of one update: each member's shard from the grads channel, in order, then apply.
    void apply_update(const Member *members, std::size_t count);
    // Owner side of a serve: this rank's shard of the current version to `worker`.
    void hand_out(int worker, std::int64_t version, std::int64_t label, const ReplyHeader *account);
    void record_failure(std::exception_ptr error) noexcept;
    void stop_threads() noexcept;
    [[noreturn]] void rethrow_first();

    AsyncSgdOptimizer::State &s_;
    const std::vector<std::int64_t> clock_samples_;
    const int epoch_;
    const std::int64_t first_step_;
    const std::function<void(std::int64_t)> before_update_;
    const int rank_, size_;
    const std::size_t shard_bytes_;
    std::int64_t applied_ = 0; // server thread: updates applied

    // worker side
    std::int64_t seq_ = 0;
    std::vector<unsigned char> send_buffer_;
    std::vector<std::vector<unsigned char>> reply_buffers_; // one per owner
    // server side
    std::vector<unsigned char> grad_buffer_, reply_buffer_;

    std::mutex mutex_; // the keeper's queue, the receivers' arming, the failure, stopping
    std::condition_variable cv_;
    std::deque<PushNotice> queue_;
    std::vector<Receiver> receivers_; // rank 0: index = worker
    bool stopping_ = false;
    std::exception_ptr failure_;
    std::thread server_;
    bool joined_ = false;
};

} // namespace shardopt::async

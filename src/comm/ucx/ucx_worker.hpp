// Worker: one UCP context + worker + an endpoint to every process of the job, shared by the
// world communicator and every communicator split from it.
//
// Thread safety: the UCP worker runs in SERIALIZED mode and every UCP call goes through this
// class under one mutex, so a communicator's collective, send and receive queues (three
// threads) can use it at once. Waiting is blocking-friendly: spin on progress briefly, then
// arm the worker and sleep on its event fd (bounded, so nothing depends on a wakeup arriving).
//
// Dead peers: endpoints use UCP_ERR_HANDLING_MODE_NONE, because UCX 1.13 leaves the shared
// memory transports (posix/sysv/cma) out of endpoints with peer error handling, and local ranks
// would talk over tcp/lo at a fraction of the bandwidth. A process's death is learned out of
// band instead, from the bootstrap connections kept open as a liveness channel
// (bootstrap/liveness.hpp, a thread watching them): progress checks its news (an atomic load), idle
// waits are bounded to a couple of milliseconds, and a rank found gone is marked lost so waiters blocked on it fail with
// peer_lost. SHARDOPT_UCX_PEER_ERRORS=1 restores UCX's own peer error handling (and its tcp-only
// local transport) for both.
#pragma once

#include <ucp/api/ucp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../bootstrap/liveness.hpp"

namespace shardopt::ucx {

using Clock = std::chrono::steady_clock;

// One tag send or receive. Owned by the caller; must stay at a fixed address until done or
// cancelled (UCX writes the receive info into it).
struct Request {
    void *handle = nullptr; // UCX request while in flight
    bool posted = false;
    bool done = false;
    bool is_recv = false;
    ucs_status_t status = UCS_OK;
    int peer = -1;             // communicator rank of the other side (diagnostics)
    int world_peer = -1;       // its world rank, when known (a receive from a lost peer is not waited on)
    std::size_t expected = 0;  // bytes
    std::size_t received = 0;  // bytes actually received (recv)
    ucp_tag_recv_info_t info{};
};

class Worker {
  public:
    // keepalive: how fast UCX should notice a dead peer when its peer error handling is used
    // (SHARDOPT_UCX_PEER_ERRORS=1; the communicator timeout / 4, capped); UCX_KEEPALIVE_INTERVAL
    // in the environment wins.
    Worker(int world_rank, int world_size, std::chrono::milliseconds keepalive);
    ~Worker();
    Worker(const Worker &) = delete;
    Worker &operator=(const Worker &) = delete;

    int world_rank() const { return world_rank_; }
    int world_size() const { return world_size_; }
    const std::vector<std::uint8_t> &address() const { return address_; }
    // Creates the endpoints (including one to itself) from every rank's worker address.
    void connect(const std::vector<std::vector<std::uint8_t>> &addresses);
    // Takes the job's liveness channel (null for a world of one).
    void attach_liveness(std::unique_ptr<bootstrap::Liveness> liveness);

    // --- requests (each locks) ----------------------------------------------------------
    void post_send(Request &r, int world_peer, std::uint64_t tag, const void *buf, std::size_t bytes);
    void post_recv(Request &r, std::uint64_t tag, std::uint64_t mask, void *buf, std::size_t bytes);
    // Sends now if UCX can complete it immediately (eager); otherwise copies the data and
    // sends it in the background (buffered send).
    void send_buffered(int world_peer, std::uint64_t tag, const void *buf, std::size_t bytes);
    // Cancels an outstanding request and releases it (receives: the buffer is no longer used).
    void cancel(Request &r);
    // Cancels many at once, waiting (bounded) for receives whose data is already in flight.
    void cancel_all(Request *const *reqs, std::size_t n);

    // Progress, then `done()` (called with the lock held; may call test_locked). Returns true
    // when done() returned true.
    template <typename Fn> bool progress_and_check(Fn &&done) {
        std::lock_guard<std::mutex> lock(mutex_);
        progress_locked();
        return done();
    }
    // Updates r from UCX; call with the lock held (inside progress_and_check). True when done.
    bool test_locked(Request &r);
    // Sleeps until UCX signals activity, another thread's progress, or `until` (at most a couple
    // of milliseconds); at once when anything progressed since progress_epoch() was `epoch` (read
    // it before looking at the requests waited for). Any number of threads may wait at once.
    void idle_wait(Clock::time_point until, std::uint64_t epoch);
    std::uint64_t progress_epoch() const noexcept { return progress_epoch_.load(std::memory_order_acquire); }

    bool lost(int world_peer) const { return lost_[world_peer].load(std::memory_order_acquire); }
    std::string lost_reason(int world_peer) const;

    // Context ids for split(): a fresh proposal (never used by this process), and the agreed
    // id (max of the members' proposals) marking everything up to it used.
    std::uint32_t propose_context();
    void commit_context(std::uint32_t agreed);

  private:
    struct EpArg {
        Worker *worker;
        int rank;
    };
    struct Detached {
        void *handle;
        std::vector<std::uint8_t> data;
    };
    static void on_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status);
    void progress_locked();
    void note_progress(); // wakes the threads in idle_wait
    void poll_liveness_locked(); // marks ranks the liveness channel found gone
    void mark_lost_locked(int world_peer, const std::string &reason, bool crashed);
    ucp_ep_h ep_for(int world_peer);

    int world_rank_, world_size_;
    ucp_context_h context_ = nullptr;
    ucp_worker_h worker_ = nullptr;
    int efd_ = -1;
    std::vector<std::uint8_t> address_;
    std::vector<ucp_ep_h> eps_;
    std::vector<std::unique_ptr<EpArg>> ep_args_;
    std::unique_ptr<std::atomic<bool>[]> lost_;
    std::vector<std::string> lost_reasons_; // under mutex_
    std::vector<bool> crashed_;             // lost without a clean goodbye (under mutex_)
    bool peer_errors_ = false;              // UCP_ERR_HANDLING_MODE_PEER
    std::size_t abandoned_sends_ = 0;       // sends released while still in flight (under mutex_)
    std::unique_ptr<bootstrap::Liveness> liveness_;
    std::list<Detached> detached_;
    std::uint32_t next_context_ = 1; // 0 is the world communicator
    mutable std::mutex mutex_;
    // Idle waits of several threads (idle_wait): the one asleep on the event fd (woken through
    // wake_fd_ too), the others on progress_cv_; any thread's progress moves progress_epoch_ and
    // wakes them, and so does the event fd's sleeper leaving.
    std::mutex sleep_mutex_;
    std::condition_variable progress_cv_;
    bool efd_sleeper_ = false;       // under sleep_mutex_
    int progress_sleepers_ = 0;      // under sleep_mutex_
    std::atomic<std::uint64_t> progress_epoch_{0}; // written under sleep_mutex_
    int wake_fd_ = -1;               // an eventfd
};

} // namespace shardopt::ucx

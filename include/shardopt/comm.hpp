// Communicator: the collectives every sharded optimizer is built on.
//
// A communicator is a group of `size()` ranks. Every rank must call the same collectives in the
// same order with matching count, dtype, op and root; a mismatch is detected and reported on
// every rank as ErrorCode::mismatch. Every blocking call gives up after timeout() with
// ErrorCode::timeout, naming the collective and the ranks that never arrived. After a timeout,
// mismatch or lost peer the communicator is aborted: later calls fail with the original reason.
//
// Buffers: `send` and `recv` may be the same pointer (in place). Asynchronous forms return a
// Work; the caller keeps the buffers alive and untouched until wait() returns. Collectives,
// blocking or not, run in the order they were issued. Sends run in issue order among sends and
// receives among receives, independently of collectives and of each other, so a posted
// recv_async never blocks a later send. One thread at a time may issue calls on a given
// communicator object, with one exception: point-to-point calls may come from two threads at once,
// one issuing the sends and the other the receives (each kind keeps its issue order).
//
// Diagnostics: every communicator remembers its last kHistory calls (kind, count, dtype, op,
// sequence number, outcome). When a call fails with a timeout, mismatch or lost peer, the
// error message ends with this rank's recent calls, so each rank's report shows where it was.
// SHARDOPT_CHECK_FINGERPRINTS=1 additionally keeps a running fingerprint (64-bit hash chain)
// of every collective this communicator ran — kind, count, dtype, op, root and byte size —
// and the backends compare it across ranks at every collective: a rank whose history
// diverged is reported as a mismatch even where the current call alone looks the same.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "shardopt/error.hpp"
#include "shardopt/types.hpp"
#include "shardopt/work.hpp"

namespace shardopt {

// What a rank asked for; also how mismatches and diagnostics describe a call.
enum class CallKind : int {
    allreduce, reduce_scatter, allgather, broadcast, reduce, barrier, send, recv, split
};
const char *call_kind_name(CallKind kind) noexcept;

struct Call {
    CallKind kind = CallKind::barrier;
    const void *send = nullptr;
    void *recv = nullptr;
    std::size_t count = 0; // elements: per rank for reduce_scatter output and allgather input
    DType dtype = DType::f32;
    ReduceOp op = ReduceOp::sum;
    int root = 0; // root for broadcast/reduce; peer for send/recv; color for split
    int tag = 0;  // tag for send/recv; key for split
};

// "allreduce(count=10, dtype=f32, op=sum)" — used in every error message about a call.
std::string describe(const Call &call);

class Communicator;
using CommunicatorPtr = std::shared_ptr<Communicator>;

class Communicator : public std::enable_shared_from_this<Communicator> {
  public:
    using Duration = std::chrono::milliseconds;
    static constexpr Duration kDefaultTimeout = std::chrono::minutes(5);

    virtual ~Communicator();
    Communicator(const Communicator &) = delete;
    Communicator &operator=(const Communicator &) = delete;

    int rank() const noexcept { return rank_; }
    int size() const noexcept { return size_; }
    virtual std::string backend_name() const = 0;

    Duration timeout() const noexcept { return timeout_; }
    void set_timeout(Duration timeout);

    // --- blocking collectives -------------------------------------------------------------
    // recv[i] = op over ranks of send[i], for i < count.
    void allreduce(const void *send, void *recv, std::size_t count, DType dtype, ReduceOp op);
    // recv (recv_count elements) = op over ranks of send[rank*recv_count ...]; send holds
    // size()*recv_count elements.
    void reduce_scatter(const void *send, void *recv, std::size_t recv_count, DType dtype, ReduceOp op);
    // recv (size()*send_count elements) = concatenation of every rank's send, in rank order.
    void allgather(const void *send, void *recv, std::size_t send_count, DType dtype);
    void broadcast(void *buffer, std::size_t count, DType dtype, int root);
    // Like allreduce but only root's recv is written (recv may be null on other ranks).
    void reduce(const void *send, void *recv, std::size_t count, DType dtype, ReduceOp op, int root);
    void barrier();
    // Point to point. send is buffered: it returns once the data is handed to the transport.
    void send(const void *buffer, std::size_t count, DType dtype, int peer, int tag = 0);
    void recv(void *buffer, std::size_t count, DType dtype, int peer, int tag = 0);

    // Collective over this communicator: ranks with the same color form a new communicator,
    // ordered by (key, rank). color < 0 means "no group": returns nullptr for that rank.
    CommunicatorPtr split(int color, int key);

    // --- asynchronous forms: issue now, complete in issue order --------------------------
    WorkPtr allreduce_async(const void *send, void *recv, std::size_t count, DType dtype, ReduceOp op);
    WorkPtr reduce_scatter_async(const void *send, void *recv, std::size_t recv_count, DType dtype, ReduceOp op);
    WorkPtr allgather_async(const void *send, void *recv, std::size_t send_count, DType dtype);
    WorkPtr broadcast_async(void *buffer, std::size_t count, DType dtype, int root);
    WorkPtr reduce_async(const void *send, void *recv, std::size_t count, DType dtype, ReduceOp op, int root);
    WorkPtr barrier_async();
    WorkPtr send_async(const void *buffer, std::size_t count, DType dtype, int peer, int tag = 0);
    WorkPtr recv_async(void *buffer, std::size_t count, DType dtype, int peer, int tag = 0);

    // Typed conveniences.
    template <typename T> void allreduce(T *data, std::size_t count, ReduceOp op) {
        allreduce(data, data, count, dtype_of<T>::value, op);
    }

    // Aborts the communicator: pending and later calls fail with `reason`. Backends that can,
    // wake the other ranks too (in-process: the whole group). Idempotent; first reason wins.
    void abort(const std::string &reason, ErrorCode code = ErrorCode::invalid_state);
    // Reason this communicator was aborted, or empty.
    std::string abort_reason() const;
    // The code it was aborted with (invalid_state when none was given; ok when not aborted): what
    // an operation in flight when the abort came fails with, as later calls do.
    ErrorCode abort_code() const;

    // --- diagnostics ----------------------------------------------------------------------
    static constexpr std::size_t kHistory = 8;
    // "rank 1 recent calls (oldest first): #3 allreduce(...) ok; #4 barrier() failed"; the
    // text appended to timeout, mismatch and peer-lost errors.
    std::string recent_calls() const;
    // Whether SHARDOPT_CHECK_FINGERPRINTS was on when this communicator was created.
    bool fingerprint_checks() const noexcept { return fingerprint_checks_; }
    // Fingerprint of every collective run so far including the current one (0 when checks
    // are off). Read by backends while running a collective, on the collective queue thread.
    std::uint64_t history_fingerprint() const noexcept { return fingerprint_; }

    // Bytes this rank has moved between ranks through this communicator so far: message
    // payloads it sent, peer memory it read or wrote directly (CMA, in-process), shared-memory
    // payloads of other ranks it copied out. Each transfer is counted once, by the rank that
    // performs it, so the sum over ranks is the group's traffic. Counted by the backends as the
    // data moves (not derived from call sizes); what a step costs on the wire is the difference
    // of two readings. Any thread may read it. A communicator that forwards its calls to another
    // (staged, host buffers over a GPU one) reports the other's count; nccl counts nothing (0):
    // NCCL does not say what its algorithms move.
    virtual std::uint64_t bytes_sent() const noexcept { return bytes_sent_.load(std::memory_order_relaxed); }
    // For backends (and the layers that drive one): records `bytes` moved by this rank.
    void count_sent(std::size_t bytes) noexcept { bytes_sent_.fetch_add(bytes, std::memory_order_relaxed); }

    // --- topology -------------------------------------------------------------------------
    // The host each rank runs on, one index per rank, hosts numbered in the order of their
    // lowest rank (rank 0 is on host 0); empty where the backend does not know. UCX learns it as
    // the job starts (docs/collectives.md: host keys); an in-process group is one host unless
    // made with ranks_per_host. A split communicator keeps its members' hosts. Layers above use
    // it to combine a host's ranks before anything crosses a host's link.
    const std::vector<int> &host_of_ranks() const noexcept { return host_of_ranks_; }

  protected:
    Communicator(int rank, int size);

    // Backends implement one validated call at a time, in issue order, on one thread at a time.
    virtual void run(const Call &call) = 0;
    // split: backends create the child communicator (null for color < 0).
    virtual CommunicatorPtr run_split(int color, int key) = 0;

    // For backends: the hosts of the ranks (see host_of_ranks; renumbered by lowest rank here).
    void set_host_of_ranks(const std::vector<int> &host_of);

    // Called once by abort(): lets the backend wake peers blocked in this communicator.
    virtual void on_abort(const std::string &reason, ErrorCode code);

    // Called on the issuing thread as a call is issued, before it waits in its queue; what it
    // returns is the call's issue_capture() while run() runs it. GPU communicators record the
    // caller's stream position here, so a call (async ones above all) is ordered after the work
    // the caller enqueued before it, not after whatever the caller enqueues while it waits.
    // Default: nothing (null).
    virtual std::shared_ptr<void> capture_at_issue(const Call &call);
    // Inside run(): what capture_at_issue returned for the call being run (else null).
    static const std::shared_ptr<void> &issue_capture() noexcept;
    // Stops the call queues: operations still in flight are aborted (so they return promptly)
    // and their threads joined. Every backend's destructor calls this first, while the state
    // those operations use is still alive. Idempotent.
    void shutdown_queues() noexcept;

  private:
    class Queue;
    void validate(const Call &call) const;
    void guarded(const Call &call, const std::function<void()> &body);
    void run_blocking(const Call &call);
    WorkPtr run_async(const Call &call);
    class Queue &queue_for(CallKind kind);

    struct HistoryEntry {
        std::uint64_t seq; // per stream: collectives, sends, receives each count from 0
        Call call;
        int state; // 0 running, 1 ok, 2 failed
    };
    std::size_t record_start(const Call &call);
    void record_end(std::size_t id, bool ok);

    int rank_;
    int size_;
    Duration timeout_;
    mutable std::mutex history_mutex_;
    // A ring of the last kHistory calls (no allocation per call): call id i is in slot i % kHistory.
    HistoryEntry history_[kHistory] = {};
    std::size_t history_next_ = 0; // id of the next call recorded
    std::uint64_t stream_seq_[3] = {0, 0, 0};
    bool fingerprint_checks_ = false;
    std::uint64_t fingerprint_ = 0;
    std::unique_ptr<Queue> collective_queue_, send_queue_, recv_queue_;
    mutable std::mutex abort_mutex_;
    std::string abort_reason_;
    ErrorCode abort_code_ = ErrorCode::ok;
    std::atomic<bool> aborted_{false}; // abort_reason_ is set: lets every call check without the lock
    std::atomic<std::uint64_t> bytes_sent_{0};
    std::vector<int> host_of_ranks_;
};

// Timeout taken from SHARDOPT_TIMEOUT_MS when set, else Communicator::kDefaultTimeout.
Communicator::Duration default_timeout_from_env();

} // namespace shardopt

// Exchange: the messaging state of one collective on a UcxComm.
//
// On construction it sends this rank's header (sequence number, kind, count, dtype, op, root)
// to every other member and posts a receive for each of theirs. Algorithms then post tagged
// sends and receives through it and wait on them; every wait also checks the headers that
// arrived, so a rank whose call disagrees is reported as ErrorCode::mismatch (naming every
// rank's call) on every rank, even when the disagreeing calls would never exchange data.
// On one host the headers travel through a shared-memory arena instead (shm_arena.hpp).
// finish() waits for all headers; the destructor cancels whatever is still outstanding, so an
// algorithm that throws never leaves UCX writing into a caller's buffer.
//
// The header check compares the normalized numeric fields (no text is built unless a mismatch
// is reported). With SHARDOPT_CHECK_FINGERPRINTS=1 the header also carries the communicator's
// history fingerprint (Communicator::history_fingerprint: a hash chain over every collective's
// kind, count, dtype, op, root and byte size) and ranks must agree on it too; a rank with the
// checks off sends 0, which is not compared, so mixed settings never fail a job.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "ucx_comm.hpp"
#include "wire_header.hpp"

namespace shardopt::ucx {

class ShmArena;

// The per-collective bookkeeping, kept by the communicator and reused call after call so a
// small collective allocates nothing (collectives on a communicator run one at a time).
struct ExchangeStorage {
    std::vector<WireHeader> headers;
    std::vector<Request> header_recvs;
    std::vector<char> header_checked;
    std::deque<Request> requests;
    bool in_use = false;
};

class Exchange {
  public:
    // With a shared-memory arena (comm.arena()), the header goes through it instead of UCX,
    // together with `payload_bytes` of `payload` (the input of an arena algorithm); with
    // `already_published`, the caller published it there (UcxComm's small collectives, which
    // take an Exchange only when their spin ran out or a peer's call differs).
    Exchange(UcxComm &comm, const Call &call, std::uint64_t seq, std::uint32_t context_proposal = 0,
             const void *payload = nullptr, std::size_t payload_bytes = 0, bool already_published = false);
    ~Exchange();
    Exchange(const Exchange &) = delete;
    Exchange &operator=(const Exchange &) = delete;

    int rank() const { return rank_; }
    int size() const { return size_; }
    const Call &call() const { return call_; }
    UcxComm &comm() { return comm_; }

    // Post a message of collective step `step` (steps must be posted in the same order on
    // sender and receiver when they repeat).
    Request &send(int peer, std::uint32_t step, const void *buf, std::size_t bytes);
    Request &recv(int peer, std::uint32_t step, void *buf, std::size_t bytes);
    void wait(Request &r);
    void wait_all();
    // Waits for every header (and verifies them); spins briefly first when they come through
    // the arena.
    void wait_headers();
    // Waits (spin, then block with the collective's deadline) until ready() holds; a lost
    // `peer` fails the wait. For algorithms that watch a peer's progress in the arena.
    void wait_for_peer(int peer, const std::function<bool()> &ready);
    // The same, for a wait whose culprit can change while it waits (the end of a chain of ranks
    // each waiting for the next): peer() is asked again at every sleep and at the deadline, so a
    // timeout names the rank that holds everyone up then, not the one that did when it began.
    void wait_for_peer(const std::function<int()> &peer, const std::function<bool()> &ready);
    // After a failed transfer from `peer`: waits briefly for the root cause (an abort notice,
    // the peer found lost) and throws it, else throws Error(code, what).
    [[noreturn]] void fail_from_peer(int peer, ErrorCode code, const std::string &what);
    // Waits for every data request and every header (and verifies them).
    void finish();
    ShmArena *arena() const { return arena_; }
    // Every rank's header (valid after finish()).
    const std::vector<WireHeader> &headers() const { return headers_; }

  private:
    void poll_headers_locked();
    bool all_headers() const;
    bool pending_with(int peer) const;
    void check_result(Request &r);
    [[noreturn]] void throw_mismatch();
    bool header_agrees(int peer) const;
    std::string timeout_text() const;
    void block_until(const std::function<bool()> &pred);
    void start_clock(); // sets start_ and deadline_ on first use
    // Templates (defined and used in exchange.cpp only): the hot polling loop calls ready()
    // directly, without a std::function in between.
    template <typename Ready> bool spin(const Ready &ready);
    // Arena waits: spin, then sleep on the bell of the rank awaited() names until ready().
    template <typename Awaited, typename Ready, typename WaitingOn, typename Text>
    void wait_in_arena(const Awaited &awaited, const Ready &ready, const WaitingOn &waiting_on, const Text &text);

    UcxComm &comm_;
    ShmArena *arena_;
    Call call_;
    std::uint64_t seq_;
    int rank_, size_;
    Clock::time_point start_{}, deadline_{};
    ExchangeStorage &storage_;
    std::vector<WireHeader> &headers_;
    std::vector<Request> &header_recvs_;
    std::vector<char> &header_checked_;
    bool header_mismatch_ = false;
    std::deque<Request> &requests_;
};

// The part of a call every rank must agree on, as text ("split" for split).
std::string call_signature(const Call &call);

// This rank's header for collective `seq` of `call`.
WireHeader wire_header(const UcxComm &comm, const Call &call, std::uint64_t seq, std::uint32_t context_proposal = 0);

} // namespace shardopt::ucx

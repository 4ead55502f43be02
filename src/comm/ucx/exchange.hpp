// Exchange: the messaging state of one collective on a UcxComm.
//
// On construction it sends this rank's header (sequence number, kind, count, dtype, op, root)
// to every other member and posts a receive for each of theirs. Algorithms then post tagged
// sends and receives through it and wait on them; every wait also checks the headers that
// arrived, so a rank whose call disagrees is reported as ErrorCode::mismatch (naming every
// rank's call) on every rank, even when the disagreeing calls would never exchange data.
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

namespace shardopt::ucx {

struct WireHeader {
    std::uint32_t magic = 0x52484453; // "SHDR"
    std::uint32_t kind = 0;
    std::uint64_t seq = 0;
    std::uint64_t count = 0;
    std::int32_t dtype = 0, op = 0, root = 0, tag = 0;
    std::uint32_t context_proposal = 0, reserved = 0;
    std::uint64_t fingerprint = 0; // 0: fingerprint checks off on the sender
};

class Exchange {
  public:
    Exchange(UcxComm &comm, const Call &call, std::uint64_t seq, std::uint32_t context_proposal = 0);
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
    // Waits for every data request and every header (and verifies them).
    void finish();
    // Every rank's header (valid after finish()).
    const std::vector<WireHeader> &headers() const { return headers_; }

  private:
    void poll_headers_locked();
    bool pending_with(int peer) const;
    void check_result(Request &r);
    [[noreturn]] void throw_mismatch();
    bool header_agrees(int peer) const;
    std::string timeout_text() const;
    void block_until(const std::function<bool()> &pred);

    UcxComm &comm_;
    Call call_;
    std::uint64_t seq_;
    int rank_, size_;
    Clock::time_point start_, deadline_;
    std::vector<WireHeader> headers_;
    std::vector<Request> header_recvs_;
    std::vector<bool> header_checked_;
    bool header_mismatch_ = false;
    std::deque<Request> requests_;
};

// The part of a call every rank must agree on, as text ("split" for split).
std::string call_signature(const Call &call);

} // namespace shardopt::ucx

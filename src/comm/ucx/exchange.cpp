#include "exchange.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sched.h>
#include <sstream>

#include "shardopt/error.hpp"
#include "shm_arena.hpp"

namespace shardopt::ucx {
namespace {

Call call_from(const WireHeader &h) {
    Call c;
    c.kind = CallKind(h.kind);
    c.count = std::size_t(h.count);
    c.dtype = DType(h.dtype);
    c.op = ReduceOp(h.op);
    c.root = h.root;
    c.tag = h.tag;
    return c;
}

long long ms_since(Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

std::string rank_list(const std::vector<int> &ranks) {
    std::string out;
    for (std::size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
    return out;
}

} // namespace

std::string call_signature(const Call &call) {
    if (call.kind == CallKind::split) return "split";
    Call c = call;
    if (c.kind == CallKind::allgather || c.kind == CallKind::barrier || c.kind == CallKind::broadcast)
        c.op = ReduceOp::sum;
    if (c.kind != CallKind::broadcast && c.kind != CallKind::reduce) c.root = 0;
    if (c.kind == CallKind::barrier) {
        c.count = 0;
        c.dtype = DType::u8;
    }
    c.tag = 0;
    return describe(c);
}

WireHeader wire_header(const UcxComm &comm, const Call &call, std::uint64_t seq, std::uint32_t context_proposal) {
    WireHeader h;
    h.kind = std::uint32_t(call.kind);
    h.seq = seq;
    h.count = call.count;
    h.dtype = std::int32_t(call.dtype);
    h.op = std::int32_t(call.op);
    h.root = call.root;
    h.tag = call.tag;
    h.context_proposal = context_proposal;
    h.fingerprint = comm.history_fingerprint();
    return h;
}

Exchange::Exchange(UcxComm &comm, const Call &call, std::uint64_t seq, std::uint32_t context_proposal,
                   const void *payload, std::size_t payload_bytes, bool already_published)
    : comm_(comm), arena_(comm.arena()), call_(call), seq_(seq), rank_(comm.rank()), size_(comm.size()), storage_(comm.exchange_storage()), headers_(storage_.headers),
      header_recvs_(storage_.header_recvs), header_checked_(storage_.header_checked), requests_(storage_.requests) {
    if (storage_.in_use) throw Error(ErrorCode::internal, "ucx: two collectives at once on one communicator");
    storage_.in_use = true;
    // Over the arena a small collective usually ends before a clock read would (tens of ns):
    // the deadline starts at the first wait that blocks.
    if (!arena_) start_clock();
    headers_.assign(std::size_t(size_), WireHeader{});
    header_recvs_.assign(std::size_t(size_), Request{});
    header_checked_.assign(std::size_t(size_), 0);
    requests_.clear();
    WireHeader &mine = headers_[rank_];
    mine = wire_header(comm, call, seq, context_proposal);
    header_checked_[rank_] = true;
    if (arena_) {
        if (!already_published) arena_->publish(seq, mine, payload, payload_bytes, call.send, call.recv);
        return;
    }
    Worker &w = comm_.worker();
    const std::uint32_t ctx = comm_.context();
    for (int p = 0; p < size_; ++p) {
        if (p == rank_) continue;
        header_recvs_[p].peer = p;
        header_recvs_[p].world_peer = comm_.world_rank_of(p);
        w.post_recv(header_recvs_[p], make_tag(ctx, TagClass::header, p, seq), kFullMask, &headers_[p],
                    sizeof(WireHeader));
    }
    // Headers are sent buffered: they never reference this object after the constructor.
    for (int k = 1; k < size_; ++k) {
        const int p = (rank_ + k) % size_;
        w.send_buffered(comm_.world_rank_of(p), make_tag(ctx, TagClass::header, rank_, seq), &mine,
                        sizeof(WireHeader));
    }
}

Exchange::~Exchange() {
    std::vector<Request *> open;
    for (auto &r : requests_)
        if (!r.done) open.push_back(&r);
    for (auto &r : header_recvs_)
        if (r.posted && !r.done) open.push_back(&r);
    if (!open.empty()) comm_.worker().cancel_all(open.data(), open.size());
    requests_.clear();
    storage_.in_use = false;
}

Request &Exchange::send(int peer, std::uint32_t step, const void *buf, std::size_t bytes) {
    requests_.emplace_back();
    Request &r = requests_.back();
    r.peer = peer;
    comm_.worker().post_send(r, comm_.world_rank_of(peer), data_tag(comm_.context(), rank_, seq_, step), buf, bytes);
    comm_.count_sent(bytes);
    return r;
}

Request &Exchange::recv(int peer, std::uint32_t step, void *buf, std::size_t bytes) {
    requests_.emplace_back();
    Request &r = requests_.back();
    r.peer = peer;
    r.world_peer = comm_.world_rank_of(peer);
    comm_.worker().post_recv(r, data_tag(comm_.context(), peer, seq_, step), kFullMask, buf, bytes);
    return r;
}

namespace {

// call_signature's normalization, on the numeric fields: what every rank must agree on.
struct NormalizedCall {
    std::uint32_t kind;
    std::uint64_t count;
    std::int32_t dtype, op, root;
    bool operator==(const NormalizedCall &o) const {
        return kind == o.kind && count == o.count && dtype == o.dtype && op == o.op && root == o.root;
    }
};

NormalizedCall normalized(const WireHeader &h) {
    const CallKind k = CallKind(h.kind);
    NormalizedCall n{h.kind, h.count, h.dtype, h.op, h.root};
    if (k == CallKind::split) n = NormalizedCall{h.kind, 0, 0, 0, 0};
    if (k == CallKind::allgather || k == CallKind::barrier || k == CallKind::broadcast)
        n.op = std::int32_t(ReduceOp::sum);
    if (k != CallKind::broadcast && k != CallKind::reduce) n.root = 0;
    if (k == CallKind::barrier) {
        n.count = 0;
        n.dtype = std::int32_t(DType::u8);
    }
    return n;
}

} // namespace

bool Exchange::header_agrees(int p) const {
    const Request &r = header_recvs_[p];
    const WireHeader &h = headers_[p];
    const WireHeader &mine = headers_[rank_];
    if (!arena_ && (r.status != UCS_OK || r.received != sizeof(WireHeader))) return false;
    if (h.magic != mine.magic || h.seq != seq_) return false;
    if (!(normalized(h) == normalized(mine))) return false;
    return h.fingerprint == 0 || mine.fingerprint == 0 || h.fingerprint == mine.fingerprint;
}

void Exchange::poll_headers_locked() {
    if (arena_) {
        for (int p = 0; p < size_; ++p) {
            if (header_checked_[p] || !arena_->published(p, seq_)) continue;
            headers_[p] = arena_->header(p, seq_);
            header_checked_[p] = true;
            if (!header_agrees(p)) header_mismatch_ = true;
        }
        return;
    }
    Worker &w = comm_.worker();
    for (int p = 0; p < size_; ++p) {
        if (header_checked_[p] || !w.test_locked(header_recvs_[p])) continue;
        header_checked_[p] = true;
        if (!header_agrees(p)) header_mismatch_ = true;
    }
}

bool Exchange::pending_with(int peer) const {
    if (!header_checked_[peer]) return true;
    for (const auto &r : requests_)
        if (r.peer == peer && !r.done) return true;
    return false;
}

std::string Exchange::timeout_text() const {
    std::vector<int> missing, stuck;
    for (int p = 0; p < size_; ++p)
        if (!header_checked_[p]) missing.push_back(p);
    for (const auto &r : requests_)
        if (!r.done && std::find(stuck.begin(), stuck.end(), r.peer) == stuck.end()) stuck.push_back(r.peer);
    std::ostringstream out;
    out << describe(call_) << " (collective #" << seq_ << ") timed out after " << ms_since(start_) << " ms on rank "
        << rank_ << ": ";
    if (!missing.empty())
        out << "ranks never arrived: " << rank_list(missing);
    else
        out << "every rank arrived, but no data came from rank(s) " << rank_list(stuck);
    return out.str();
}

void Exchange::start_clock() {
    if (start_ != Clock::time_point{}) return;
    start_ = Clock::now();
    deadline_ = start_ + comm_.timeout();
}

void Exchange::block_until(const std::function<bool()> &pred) {
    start_clock();
    comm_.block(
        [&] {
            poll_headers_locked();
            return header_mismatch_ || pred();
        },
        deadline_, [&](int p) { return pending_with(p); }, [&] { return timeout_text(); });
    if (header_mismatch_) throw_mismatch();
}

void Exchange::throw_mismatch() {
    // Every rank sent its header first thing, so the rest arrive promptly; wait a little for
    // them so the report names every rank's call.
    start_clock();
    const auto until = std::min(deadline_, Clock::now() + std::chrono::seconds(2));
    try {
        comm_.block(
            [&] {
                poll_headers_locked();
                return all_headers();
            },
            until, [&](int p) { return !header_checked_[p]; }, [] { return std::string("headers"); });
    } catch (const Error &) {
    }
    std::map<std::string, std::vector<int>> by_signature;
    std::vector<std::string> order;
    std::vector<int> missing;
    for (int p = 0; p < size_; ++p) {
        if (!header_checked_[p]) {
            missing.push_back(p);
            continue;
        }
        std::string sig;
        const WireHeader &h = headers_[p];
        if (p != rank_ && ((!arena_ && (header_recvs_[p].status != UCS_OK ||
                                        header_recvs_[p].received != sizeof(WireHeader))) ||
                           h.magic != headers_[rank_].magic))
            sig = std::string("something else (a message that is not a shardopt header: ") +
                  ucs_status_string(header_recvs_[p].status) + ", " + std::to_string(header_recvs_[p].received) +
                  " bytes)";
        else if (h.seq != seq_)
            sig = call_signature(call_from(h)) + " as collective #" + std::to_string(h.seq);
        else
            sig = call_signature(call_from(h));
        if (!by_signature.count(sig)) order.push_back(sig);
        by_signature[sig].push_back(p);
    }
    if (order.size() == 1 && missing.empty()) {
        // Same call everywhere: the history fingerprints differ (SHARDOPT_CHECK_FINGERPRINTS).
        std::map<std::uint64_t, std::vector<int>> by_fp;
        for (int p = 0; p < size_; ++p)
            if (headers_[p].fingerprint) by_fp[headers_[p].fingerprint].push_back(p);
        std::string text = "collective history fingerprint mismatch at collective #" + std::to_string(seq_) + " (" +
                           order[0] + " on every rank, but earlier calls differed):";
        char hex[32];
        for (const auto &[fp, ranks] : by_fp) {
            std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fp));
            text += " ranks " + rank_list(ranks) + " have " + hex + ";";
        }
        text.pop_back();
        throw Error(ErrorCode::mismatch, text);
    }
    std::string text = "collective mismatch across ranks at collective #" + std::to_string(seq_) + ": ";
    for (std::size_t i = 0; i < order.size(); ++i) {
        const auto &ranks = by_signature[order[i]];
        text += (i ? "; " : "") + std::string(ranks.size() > 1 ? "ranks " : "rank ") + rank_list(ranks) +
                " called " + order[i];
    }
    if (!missing.empty()) text += "; rank(s) " + rank_list(missing) + " never arrived";
    throw Error(ErrorCode::mismatch, text);
}

void Exchange::check_result(Request &r) {
    if (r.status == UCS_OK && (!r.is_recv || r.received == r.expected)) return;
    const bool size_problem = r.status == UCS_ERR_MESSAGE_TRUNCATED || (r.status == UCS_OK && r.is_recv);
    start_clock();
    if (!size_problem) {
        // A transfer failed because a peer process is gone. Report the root cause when it is
        // known shortly: another rank's abort notice (it failed first, e.g. on the rank that
        // died before this one), else the liveness channel's word on this peer.
        const auto until = std::min(deadline_, Clock::now() + std::chrono::seconds(1));
        try {
            comm_.block([] { return false; }, until, [&](int p) { return p == r.peer; }, [] { return std::string(); });
        } catch (const Error &e) {
            if (e.code() != ErrorCode::timeout) throw;
        }
        std::string others;
        for (int p = 0; p < size_; ++p)
            if (p != rank_ && p != r.peer && comm_.worker().lost(comm_.world_rank_of(p)))
                others += (others.empty() ? "; also lost: rank " : ", rank ") + std::to_string(p) + " (" +
                          comm_.worker().lost_reason(comm_.world_rank_of(p)) + ")";
        throw Error(ErrorCode::peer_lost, describe(call_) + " (collective #" + std::to_string(seq_) + ") on rank " +
                                              std::to_string(rank_) + ": rank " + std::to_string(r.peer) +
                                              " was lost (" + ucs_status_string(r.status) + ")" + others);
    }
    // A message of the wrong size means the ranks disagree: report it from the headers.
    header_mismatch_ = true;
    throw_mismatch();
}

void Exchange::wait(Request &r) {
    Worker &w = comm_.worker();
    if (!r.done) block_until([&] { return w.test_locked(r); });
    check_result(r);
}

void Exchange::wait_all() {
    for (auto &r : requests_) wait(r);
}

bool Exchange::all_headers() const {
    return std::all_of(header_checked_.begin(), header_checked_.end(), [](char b) { return b != 0; });
}

namespace {
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
}
} // namespace

template <typename Ready> bool Exchange::spin(const Ready &ready) {
    // Peers on this host answer within a few hundred nanoseconds: spin without the worker lock
    // first. When ranks outnumber cores, yield every poll so the peer we wait for gets the core;
    // otherwise only once the peer is late (a yield costs more than the handoff, but a peer
    // descheduled by some other process needs the core). False when the spin ran out: the
    // caller then blocks (timeouts, lost peers and abort notices are checked there).
    const bool share_cores = comm_.shares_cores();
    constexpr unsigned kPureSpins = 2048;
    Clock::time_point until{};
    for (unsigned i = 1;; ++i) {
        if (ready()) return true;
        if (share_cores || i > kPureSpins)
            sched_yield();
        else
            cpu_relax();
        if (i % 256 == 0) { // the clock costs tens of nanoseconds: read it rarely
            const auto now = Clock::now();
            if (until == Clock::time_point{})
                until = now + comm_.spin_time();
            else if (now >= until)
                return false;
        }
    }
}

template <typename Awaited, typename Ready, typename WaitingOn, typename Text>
void Exchange::wait_in_arena(const Awaited &awaited, const Ready &ready, const WaitingOn &waiting_on, const Text &text) {
    if (spin(ready)) return;
    // Longer waits sleep on the awaited rank's bell (a futex in the arena, rung by each of its
    // publishes), in slices short enough for the communicator's checks (lost peer, abort
    // notice, deadline) to run between them.
    start_clock();
    Clock::time_point lost_grace{};
    for (;;) {
        if (comm_.poll_once(ready, deadline_, waiting_on, text, lost_grace)) return;
        arena_->sleep_unless(awaited(), ready, std::chrono::milliseconds(1));
        if (ready()) return;
    }
}

void Exchange::wait_headers() {
    if (arena_) {
        const auto ready = [&] {
            poll_headers_locked();
            return header_mismatch_ || all_headers();
        };
        const auto first_missing = [&] {
            for (int p = 0; p < size_; ++p)
                if (!header_checked_[p]) return p;
            return rank_;
        };
        wait_in_arena(first_missing, ready, [&](int p) { return !header_checked_[p]; }, [&] { return timeout_text(); });
        if (header_mismatch_) throw_mismatch();
        return;
    }
    block_until([&] { return all_headers(); });
}

void Exchange::fail_from_peer(int peer, ErrorCode code, const std::string &what) {
    // A transfer from `peer` failed: that peer is gone or abandoned the collective. Report the
    // root cause when it is known shortly (another rank's abort notice, or the liveness
    // channel's word on the peer), else `what`.
    start_clock();
    const auto until = std::min(deadline_, Clock::now() + std::chrono::seconds(1));
    try {
        comm_.block([] { return false; }, until, [&](int p) { return p == peer; }, [] { return std::string(); });
    } catch (const Error &e) {
        if (e.code() != ErrorCode::timeout) throw;
    }
    throw Error(code, what);
}

void Exchange::wait_for_peer(int peer, const std::function<bool()> &ready) {
    wait_for_peer([peer] { return peer; }, ready);
}

void Exchange::wait_for_peer(const std::function<int()> &peer, const std::function<bool()> &ready) {
    wait_in_arena(peer, ready, [&](int p) { return p == peer(); },
                  [&] {
                      return describe(call_) + " (collective #" + std::to_string(seq_) + ") timed out after " +
                             std::to_string(ms_since(start_)) + " ms on rank " + std::to_string(rank_) +
                             ": every rank arrived, but rank " + std::to_string(peer()) + " made no progress";
                  });
}

void Exchange::finish() {
    wait_all();
    wait_headers();
}

} // namespace shardopt::ucx

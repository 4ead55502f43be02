#include "ucx_comm.hpp"

#include <sched.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "../env_switch.hpp"
#include "../reduction.hpp"
#include "algorithms.hpp"
#include "exchange.hpp"
#include "shardopt/error.hpp"
#include "test_hook.hpp"

namespace shardopt::ucx {
namespace {

constexpr std::size_t kNoticeBytes = 4096;

std::size_t env_size(const char *name, std::size_t fallback) {
    if (const char *v = std::getenv(name)) {
        char *end = nullptr;
        const unsigned long long x = std::strtoull(v, &end, 10);
        if (end != v && *end == '\0' && x > 0) return std::size_t(x);
    }
    return fallback;
}

struct P2pHeader {
    std::uint64_t count;
    std::int32_t dtype;
    std::int32_t magic;
};

long long ms_since(Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

} // namespace

const Tuning &Tuning::get() {
    static const Tuning t = [] {
        Tuning x;
        x.small_bytes = env_size("SHARDOPT_UCX_SMALL_BYTES", x.small_bytes);
        x.chunk_bytes = env_size("SHARDOPT_UCX_CHUNK_BYTES", x.chunk_bytes);
        x.recv_slots = env_size("SHARDOPT_UCX_RECV_SLOTS", x.recv_slots);
        x.handoff_bytes = env_size("SHARDOPT_UCX_HANDOFF_BYTES", x.handoff_bytes);
        x.spin = std::chrono::microseconds(env_size("SHARDOPT_UCX_SPIN_US", std::size_t(x.spin.count())));
        x.hier_piece_bytes = env_size("SHARDOPT_UCX_HIER_PIECE_BYTES", x.hier_piece_bytes);
        if (const char *v = std::getenv("SHARDOPT_CMA")) x.cma = !switched_off(v);
        if (const char *v = std::getenv("SHARDOPT_UCX_STAGE")) x.stage_inputs = !switched_off(v);
        return x;
    }();
    return t;
}

UcxComm::UcxComm(std::shared_ptr<Worker> worker, std::vector<int> world_ranks, int rank, std::uint32_t context)
    : Communicator(rank, int(world_ranks.size())), worker_(std::move(worker)), world_ranks_(std::move(world_ranks)),
      context_(context), exchange_storage_(std::make_unique<ExchangeStorage>()), notice_buffer_(kNoticeBytes) {
    require(size() <= kMaxRanks, ErrorCode::invalid_argument, "ucx: more ranks than the tag layout allows");
    require(context_ <= kMaxContext, ErrorCode::unsupported, "ucx: communicator context ids exhausted");
    worker_->post_recv(notice_request_, make_tag(context_, TagClass::control, 0, 0), kAnySourceMask,
                       notice_buffer_.data(), notice_buffer_.size());
}

UcxComm::~UcxComm() {
    shutdown_queues(); // operations in flight use the worker below
    worker_->cancel(notice_request_);
}

unsigned char *UcxComm::scratch(int slot, std::size_t bytes) {
    if (scratch_.size() <= std::size_t(slot)) scratch_.resize(std::size_t(slot) + 1);
    auto &buf = scratch_[slot];
    if (buf.size() < bytes + 1) buf.resize(bytes + 1);
    return buf.data();
}

void UcxComm::poll_notice_locked() {
    if (notice_seen_ || !worker_->test_locked(notice_request_)) return;
    if (notice_request_.status == UCS_ERR_CANCELED) return;
    notice_seen_ = true;
    const int from = int((notice_request_.info.sender_tag >> 25) & 0xffff);
    if (notice_request_.status != UCS_OK || notice_request_.received < 4) {
        notice_code_ = ErrorCode::internal;
        notice_text_ = "rank " + std::to_string(from) + " aborted (unreadable notice)";
        return;
    }
    std::int32_t code = 0;
    std::memcpy(&code, notice_buffer_.data(), 4);
    notice_code_ = ErrorCode(code);
    notice_text_ = std::string(reinterpret_cast<const char *>(notice_buffer_.data()) + 4,
                               notice_request_.received - 4);
}

bool UcxComm::poll_once(const std::function<bool()> &pred, Clock::time_point deadline,
                        const std::function<bool(int)> &waiting_on, const std::function<std::string()> &timeout_text,
                        Clock::time_point &lost_grace) {
    bool noticed = false;
    const bool done = worker_->progress_and_check([&] {
        poll_notice_locked();
        noticed = notice_seen_;
        return pred();
    });
    if (done) return true;
    if (noticed) throw Error(notice_code_, notice_text_);
    // A peer found gone (out of band) may still have data on its way here that it sent before
    // leaving: keep progressing a little before failing the wait.
    for (int p = 0; p < size(); ++p)
        if (p != rank() && worker_->lost(world_ranks_[p]) && waiting_on(p)) {
            if (lost_grace == Clock::time_point{}) lost_grace = Clock::now() + std::chrono::milliseconds(20);
            if (Clock::now() < lost_grace) return false;
            throw Error(ErrorCode::peer_lost, "rank " + std::to_string(p) + " was lost (" +
                                                  worker_->lost_reason(world_ranks_[p]) + ") while rank " +
                                                  std::to_string(rank()) + " waited on it");
        }
    {
        const std::string reason = abort_reason();
        if (!reason.empty()) throw Error(abort_code(), "communicator aborted: " + reason);
    }
    if (Clock::now() >= deadline) throw Error(ErrorCode::timeout, timeout_text());
    return false;
}

void UcxComm::block(const std::function<bool()> &pred, Clock::time_point deadline,
                    const std::function<bool(int)> &waiting_on, const std::function<std::string()> &timeout_text) {
    const auto spin_until = Clock::now() + Tuning::get().spin;
    Clock::time_point lost_grace{};
    for (;;) {
        const std::uint64_t epoch = worker_->progress_epoch(); // before looking: see idle_wait
        if (poll_once(pred, deadline, waiting_on, timeout_text, lost_grace)) return;
        if (lost_grace != Clock::time_point{} && Clock::now() < lost_grace) continue;
        if (Clock::now() >= spin_until)
            worker_->idle_wait(deadline, epoch);
        else
            sched_yield(); // spinning: let a peer sharing this core run (oversubscribed hosts)
    }
}

void UcxComm::on_abort(const std::string &reason, ErrorCode code) {
    // The host and inter-host communicators carry this one's hierarchical collectives.
    if (hierarchy_) {
        hierarchy_->local->abort(reason, code);
        hierarchy_->cross->abort(reason, code);
    }
    // Tell every other member, so ranks that are not talking to the failed one fail fast.
    std::vector<unsigned char> msg(4);
    const std::int32_t c = std::int32_t(code);
    std::memcpy(msg.data(), &c, 4);
    std::string text = "rank " + std::to_string(rank()) + " aborted the communicator: " + reason;
    if (text.size() > kNoticeBytes - 4) text.resize(kNoticeBytes - 4);
    msg.insert(msg.end(), text.begin(), text.end());
    for (int p = 0; p < size(); ++p) {
        if (p == rank() || worker_->lost(world_ranks_[p])) continue;
        try {
            worker_->send_buffered(world_ranks_[p], make_tag(context_, TagClass::control, rank(), 0), msg.data(),
                                   msg.size());
        } catch (const Error &) {
        }
    }
}

void UcxComm::run(const Call &call) {
    switch (call.kind) {
    case CallKind::send: return run_send(call);
    case CallKind::recv: return run_recv(call);
    default: return run_collective(call);
    }
}

void UcxComm::run_send(const Call &call) {
    require(call.tag <= kMaxUserTag, ErrorCode::invalid_argument,
            describe(call) + ": tag above " + std::to_string(kMaxUserTag) + " is not supported by the ucx backend");
    const int peer = call.root;
    if (worker_->lost(world_ranks_[peer]))
        throw Error(ErrorCode::peer_lost, describe(call) + " on rank " + std::to_string(rank()) + ": rank " +
                                              std::to_string(peer) + " was lost");
    P2pHeader h{call.count, std::int32_t(call.dtype), 0x50325048};
    const std::size_t bytes = call.count * dtype_size(call.dtype);
    worker_->send_buffered(world_ranks_[peer], make_tag(context_, TagClass::p2p_header, rank(), std::uint64_t(call.tag)),
                           &h, sizeof h);
    worker_->send_buffered(world_ranks_[peer], make_tag(context_, TagClass::p2p_data, rank(), std::uint64_t(call.tag)),
                           call.send, bytes);
    count_sent(bytes);
}

void UcxComm::run_recv(const Call &call) {
    require(call.tag <= kMaxUserTag, ErrorCode::invalid_argument,
            describe(call) + ": tag above " + std::to_string(kMaxUserTag) + " is not supported by the ucx backend");
    const int peer = call.root;
    const auto start = Clock::now();
    const std::size_t bytes = call.count * dtype_size(call.dtype);
    P2pHeader h{};
    Request hr, dr;
    hr.peer = dr.peer = peer;
    hr.world_peer = dr.world_peer = world_ranks_[peer];
    worker_->post_recv(hr, make_tag(context_, TagClass::p2p_header, peer, std::uint64_t(call.tag)), kFullMask, &h,
                       sizeof h);
    worker_->post_recv(dr, make_tag(context_, TagClass::p2p_data, peer, std::uint64_t(call.tag)), kFullMask,
                       call.recv, bytes);
    struct Cancel {
        Worker &w;
        Request &a, &b;
        ~Cancel() {
            w.cancel(a);
            w.cancel(b);
        }
    } cancel{*worker_, hr, dr};
    const std::string me = std::to_string(rank());
    block([&] { return worker_->test_locked(hr) && worker_->test_locked(dr); }, start + timeout(),
          [&](int p) { return p == peer; },
          [&] {
              return describe(call) + " on rank " + me + " timed out after " + std::to_string(ms_since(start)) +
                     " ms: rank " + std::to_string(peer) + " never sent a matching message";
          });
    const bool header_ok = hr.status == UCS_OK && hr.received == sizeof h;
    Call sent;
    sent.kind = CallKind::send;
    sent.count = std::size_t(h.count);
    sent.dtype = DType(h.dtype);
    sent.root = rank();
    sent.tag = call.tag;
    if (!header_ok || sent.count != call.count || sent.dtype != call.dtype || dr.status != UCS_OK ||
        dr.received != bytes) {
        if (header_ok && (dr.status == UCS_OK || dr.status == UCS_ERR_MESSAGE_TRUNCATED))
            throw Error(ErrorCode::mismatch, "point-to-point mismatch: rank " + me + " called " + describe(call) +
                                                 " but rank " + std::to_string(peer) + " called " + describe(sent));
        throw Error(ErrorCode::peer_lost, describe(call) + " on rank " + me + ": rank " + std::to_string(peer) +
                                              " was lost (" + ucs_status_string(dr.status) + ")");
    }
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

bool UcxComm::arena_calls_agree(std::uint64_t seq) const {
    // Spins for at most spin_time(), reading the clock only every 256 polls (or yield). With a core each,
    // the peers answer within a few hundred nanoseconds: pure spinning, yielding only once a
    // peer is late (a peer descheduled by some other process needs the core). When ranks
    // outnumber cores, a yield hands the core to another process, which costs microseconds
    // here (two context switches): this rank yields only when a peer it waits for last ran on
    // this CPU (it cannot be running now, and may be waiting for this core), else it spins,
    // since that peer runs elsewhere and will publish shortly; a peer that moved is caught by
    // yielding after kPureSpins polls anyway. So each CPU switches ranks about once per
    // collective instead of ping-ponging between ranks that all wait on the other CPU.
    constexpr unsigned kPureSpins = 2048;
    const ShmArena &arena = *arena_;
    const int n = size(), me = rank();
    unsigned polls = 0, since_yield = 0;
    Clock::time_point until{};
    int cpu = shares_cores_ ? sched_getcpu() : -1;
    for (int k = 1; k < n; ++k) {
        const int p = (me + k) % n;
        while (!arena.published(p, seq)) {
            bool yield = since_yield > kPureSpins;
            int here = -1; // a peer this rank waits for that last ran on this CPU
            if (shares_cores_ && !yield)
                for (int q = p; q != me; q = (q + 1) % n)
                    if (!arena.published(q, seq) && arena.cpu_of(q) == cpu) {
                        here = q;
                        break;
                    }
            yield |= here >= 0;
            if (yield) {
                sched_yield();
                since_yield = 0;
                if (shares_cores_) {
                    cpu = sched_getcpu();
                    arena_->note_cpu(cpu);
                }
            } else {
                cpu_relax();
                ++since_yield;
            }
            if (++polls % 256 == 0 || yield) { // a yield takes microseconds: the clock is cheap beside it
                const auto now = Clock::now();
                if (until == Clock::time_point{})
                    until = now + spin_time();
                else if (now >= until)
                    return false;
            }
        }
        if (!arena.same_call(p, seq)) return false;
    }
    return true;
}

void UcxComm::run_collective(const Call &call) {
    const std::uint64_t seq = next_seq_++;
    std::size_t payload_bytes = 0;
    const void *payload = nullptr;
    if (hierarchical_applicable(call, *this)) {
        Exchange ex(*this, call, seq);
        ex.wait_headers(); // every rank called the same: a mismatch is reported, not run into
        hierarchical_collective(*this, call);
        ex.finish();
        return;
    }
    const bool in_arena = arena_ && shm_fits(call, size(), ShmArena::kCapacity);
    if (in_arena) {
        // The latency path: publish, watch the peers' slots, compute. No Exchange unless the
        // spin runs out (then it blocks with the deadline, lost-peer and abort checks) or a
        // peer's call differs (then it reports the mismatch).
        payload = shm_payload(call, rank(), size(), payload_bytes);
        arena_->publish(seq, wire_header(*this, call, seq), payload, payload_bytes, call.send, call.recv);
        if (arena_calls_agree(seq)) {
            test_hook::stop_point(test_hook::shm, seq);
            shm_result(*this, *arena_, call, seq);
            return;
        }
        Exchange ex(*this, call, seq, 0, nullptr, 0, true);
        shm_collective(ex);
        ex.finish();
        return;
    }
    const bool by_cma = arena_ && cma_applicable(call, *this);
    Exchange ex(*this, call, seq, 0, payload, payload_bytes);
    if (size() == 1) {
        local_collective(ex);
    } else if (by_cma) {
        cma_collective(ex);
    } else {
        const std::size_t bytes = call.count * dtype_size(call.dtype);
        const bool small = bytes <= Tuning::get().small_bytes;
        switch (call.kind) {
        case CallKind::allreduce:
            if (small)
                recursive_doubling_allreduce(ex);
            else
                ring_allreduce(ex);
            break;
        case CallKind::reduce_scatter: ring_reduce_scatter(ex); break;
        case CallKind::allgather: ring_allgather(ex); break;
        case CallKind::broadcast: binomial_broadcast(ex); break;
        case CallKind::reduce:
            if (small)
                binomial_reduce(ex);
            else
                ring_reduce(ex);
            break;
        case CallKind::barrier: break;
        default: throw Error(ErrorCode::internal, "ucx: unexpected call kind");
        }
    }
    ex.finish();
}

namespace {
// What rank 0 tells the others when setting up the arena: the segment's name, whether it has
// staging rings (its size), and a value in its memory for them to read with process_vm_readv
// (whether single-copy reads are allowed).
struct ArenaOffer {
    char name[64];
    std::uint64_t pid, probe_addr, probe_value, stages;
};
const std::uint64_t kCmaProbe = 0x73686172646f7074ull; // "shardopt"
} // namespace

void UcxComm::attach_shm_arena() {
    if (size() == 1) return;
    // Rank 0 makes the segment and broadcasts its name; everyone maps it and they agree (min)
    // on whether all did. Ranks on other hosts cannot open the name, so a job spanning hosts
    // never uses it. Rank 0 unlinks the name once everyone has voted (mapped or failed); when
    // the vote fails, every rank that mapped it does.
    const std::uint64_t first_seq = next_seq_;
    ArenaOffer offer{};
    std::unique_ptr<ShmArena> arena;
    const bool allowed = shm_arena_allowed() && size() <= ShmArena::kMaxRanks;
    const Tuning &tuning = Tuning::get();
    if (rank() == 0 && allowed) {
        // Staging rings are the largest part (12 MiB at 4 ranks): where /dev/shm has no room for
        // them, an arena without them still serves everything else.
        for (const bool stages : {tuning.stage_inputs && size() <= ShmArena::kStageMaxRanks, false}) {
            try {
                const std::string n = ShmArena::create_name();
                arena = std::make_unique<ShmArena>(n, size(), 0, true, stages);
                std::snprintf(offer.name, sizeof offer.name, "%s", n.c_str());
                offer.pid = std::uint64_t(getpid());
                offer.probe_addr = std::uint64_t(reinterpret_cast<std::uintptr_t>(&kCmaProbe));
                offer.probe_value = kCmaProbe;
                offer.stages = arena->has_stages() ? 1 : 0;
                break;
            } catch (const Error &) {
                if (!stages) break;
            }
        }
    }
    Call bcast;
    bcast.kind = CallKind::broadcast;
    bcast.send = bcast.recv = &offer;
    bcast.count = sizeof offer;
    bcast.dtype = DType::u8;
    run_collective(bcast);
    test_hook::stop_point(test_hook::attach, first_seq);
    offer.name[sizeof offer.name - 1] = '\0';
    // Arena mapped, rank 0's memory readable, inputs may be staged, minus the hand-off threshold:
    // agreed (min), so every rank takes the same path for every collective whatever its own
    // environment says (a rank taking another path would leave the others waiting for it).
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    const int usable = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : int(online > 0 ? online : 1);
    // A rank pinned to one CPU was placed by its launcher (shardopt-run --bind core, mpirun):
    // trust that placement. Otherwise ranks share this process's CPUs.
    const bool shares_cores = usable > 1 && size() > usable;
    std::size_t handoff = tuning.handoff_bytes;
    if (handoff == 0) handoff = shares_cores ? Tuning::kHandoffSharedCores : Tuning::kHandoffOwnCores;
    std::int64_t votes[4] = {0, 0, tuning.stage_inputs && offer.stages == 1 ? 1 : 0,
                             -std::int64_t(std::min<std::size_t>(handoff, INT64_MAX))};
    if (allowed && offer.name[0]) {
        if (rank() != 0) {
            try {
                arena = std::make_unique<ShmArena>(offer.name, size(), rank(), false, offer.stages == 1);
            } catch (const Error &) {
            }
            std::uint64_t seen = 0;
            iovec l{&seen, sizeof seen};
            iovec r{reinterpret_cast<void *>(static_cast<std::uintptr_t>(offer.probe_addr)), sizeof seen};
            votes[1] = process_vm_readv(pid_t(offer.pid), &l, 1, &r, 1, 0) == ssize_t(sizeof seen) &&
                       seen == offer.probe_value;
        } else {
            votes[1] = 1;
        }
        votes[0] = arena ? 1 : 0;
        if (!tuning.cma) votes[1] = 0;
    }
    Call vote;
    vote.kind = CallKind::allreduce;
    vote.send = vote.recv = votes;
    vote.count = 4;
    vote.dtype = DType::i64;
    vote.op = ReduceOp::min;
    try {
        run_collective(vote);
    } catch (...) {
        // A rank failed after the name was offered (rank 0 may have died or stopped, and never
        // get to unlink it): every rank that mapped the segment removes the name, so no file is
        // left in /dev/shm. Harmless when it is gone already; a rank still about to map it just
        // fails to, and the job is failing anyway.
        if (arena) arena->remove_name();
        throw;
    }
    // The two set-up collectives are the library's own: number the caller's collectives from
    // where they were (errors name them). Both finished on every rank, so no message of theirs
    // is left to be matched by a later collective with the same number.
    next_seq_ = first_seq;
    if (arena) arena->unlink();
    if (votes[0] != 1) return;
    arena_ = std::move(arena);
    cma_ = votes[1] == 1;
    stage_inputs_ = votes[2] == 1;
    handoff_bytes_ = std::size_t(-votes[3]); // the largest any rank asked for
    shares_cores_ = shares_cores;
    if (const char *v = std::getenv("SHARDOPT_SHM_YIELD")) shares_cores_ = v[0] == '1';
}

void UcxComm::attach_hosts() {
    if (size() == 1) return;
    const std::uint64_t first_seq = next_seq_;
    // SHARDOPT_HIERARCHY: 0 flat, 1 hierarchical or fail, unset: hierarchical where the layout allows.
    std::int64_t wants = 2; // 0 flat, 1 required, 2 where possible
    if (const char *v = std::getenv("SHARDOPT_HIERARCHY"); v && *v) wants = switched_off(v) ? 0 : 1;
    const std::size_t piece = Tuning::get().hier_piece_bytes;
    std::int64_t mine[3] = {std::int64_t(this_host_key()), wants,
                            piece == kHierPieceAuto ? std::int64_t(-1) : std::int64_t(piece)};
    std::vector<std::int64_t> all(std::size_t(size()) * 3);
    Call gather;
    gather.kind = CallKind::allgather;
    gather.send = mine;
    gather.recv = all.data();
    gather.count = 3;
    gather.dtype = DType::i64;
    run_collective(gather);
    host_keys_.clear();
    bool everyone_allows = true, someone_requires = false;
    std::int64_t piece_asked = -1; // the largest any rank asked for (-1: none did, probe)
    for (int r = 0; r < size(); ++r) {
        host_keys_.push_back(std::uint64_t(all[std::size_t(r) * 3]));
        everyone_allows &= all[std::size_t(r) * 3 + 1] != 0;
        someone_requires |= all[std::size_t(r) * 3 + 1] == 1;
        piece_asked = std::max(piece_asked, all[std::size_t(r) * 3 + 2]);
    }
    hier_piece_bytes_ = piece_asked < 0 ? kHierPieceAuto : std::size_t(piece_asked); // every rank cuts the same pieces
    // The exchange finished on every rank: the arena's set-up numbers from here, as when the
    // communicator is new (its stop point names collective 0 of the world).
    next_seq_ = first_seq;
    attach_by_host_keys(everyone_allows);
    // Every rank saw the same keys and votes, so all of them fail here, or none.
    if (someone_requires && !hierarchy_) {
        const HostLayout layout(host_keys_);
        throw Error(ErrorCode::invalid_argument,
                    "ucx: SHARDOPT_HIERARCHY=1 asks for hierarchical collectives, but " +
                        std::string(!everyone_allows ? "another rank set SHARDOPT_HIERARCHY=0"
                                    : layout.hosts() == 1 ? "every rank is on one host"
                                    : !layout.uniform() ? "the hosts hold different numbers of ranks"
                                                        : "every host holds one rank") +
                        " (" + std::to_string(layout.hosts()) + " hosts, " + std::to_string(size()) + " ranks)");
    }
    next_seq_ = first_seq; // the set-up collectives are the library's own (see attach_shm_arena)
}

void UcxComm::attach_by_host_keys(bool hierarchy_allowed) {
    hierarchy_allowed_ = hierarchy_allowed;
    if (size() == 1) return;
    HostLayout layout(host_keys_);
    set_host_of_ranks(layout.host_of);
    if (layout.hosts() == 1) return attach_shm_arena();
    const int per_host = int(layout.members.front().size());
    if (!hierarchy_allowed || !layout.uniform() || per_host < 2) return;
    const std::uint64_t first_seq = next_seq_;
    const int h = layout.host_of[std::size_t(rank())], l = layout.local_rank_of[std::size_t(rank())];
    auto hy = std::make_unique<Hierarchy>(Hierarchy{std::move(layout), nullptr, nullptr});
    hy->local = run_split(h, rank());  // one host: gets its arena
    hy->cross = run_split(l, h);       // one rank per host: stays flat
    if (hier_piece_bytes_ == kHierPieceAuto) hier_piece_bytes_ = probe_hier_piece_bytes(*hy);
    hierarchy_ = std::move(hy);
    next_seq_ = first_seq;
}

std::size_t UcxComm::probe_hier_piece_bytes(const Hierarchy &hy) {
    std::vector<float> probe(kHierProbeBytes / sizeof(float), 0.0f);
    // Once untimed (connections, and TCP's window opening), then timed with the host's ranks
    // starting together, as the pipeline's pieces cross.
    hy.cross->allreduce(probe.data(), probe.data(), probe.size(), DType::f32, ReduceOp::sum);
    hy.local->barrier();
    const auto start = Clock::now();
    hy.cross->allreduce(probe.data(), probe.data(), probe.size(), DType::f32, ReduceOp::sum);
    double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    // The slowest rank's time, on every rank (the pieces must be the same everywhere).
    hy.local->allreduce(&seconds, &seconds, 1, DType::f64, ReduceOp::max);
    hy.cross->allreduce(&seconds, &seconds, 1, DType::f64, ReduceOp::max);
    return hier_piece_for_link(kHierProbeBytes, hy.layout.hosts(), int(hy.layout.members.front().size()), seconds);
}

CommunicatorPtr UcxComm::run_split(int color, int key) {
    Call call;
    call.kind = CallKind::split;
    call.root = color;
    call.tag = key;
    const std::uint64_t seq = next_seq_++;
    Exchange ex(*this, call, seq, worker_->propose_context());
    ex.finish();
    const auto &headers = ex.headers();
    std::uint32_t agreed = 0;
    for (const auto &h : headers) agreed = std::max(agreed, h.context_proposal);
    worker_->commit_context(agreed);
    if (color < 0) return nullptr;
    std::vector<std::pair<int, int>> members; // (key, parent rank)
    for (int r = 0; r < size(); ++r)
        if (headers[r].root == color) members.emplace_back(headers[r].tag, r);
    std::sort(members.begin(), members.end());
    std::vector<int> world;
    int child_rank = -1;
    for (std::size_t i = 0; i < members.size(); ++i) {
        world.push_back(world_ranks_[members[i].second]);
        if (members[i].second == rank()) child_rank = int(i);
    }
    auto child = std::make_shared<UcxComm>(worker_, std::move(world), child_rank, agreed);
    child->set_timeout(timeout());
    // Members of a child of a one-host communicator share that host: give the child its own
    // arena (a collective over the child's members, who are all in this split right now). A
    // child of a communicator spanning hosts gets an arena when its members share one host, or
    // a hierarchy of its own.
    if (arena_) {
        child->attach_shm_arena();
    } else if (!host_keys_.empty()) {
        for (const auto &m : members) child->host_keys_.push_back(host_keys_[std::size_t(m.second)]);
        child->hier_piece_bytes_ = hier_piece_bytes_;
        child->attach_by_host_keys(hierarchy_allowed_);
    }
    return child;
}

} // namespace shardopt::ucx

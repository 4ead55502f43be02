// Large collectives among the ranks of one host, copying straight between each other's buffers
// (process_vm_readv / process_vm_writev: one copy, no staging, no message protocol). Every rank
// published its buffer addresses with its header in the arena; then:
//   allreduce       each rank reduces its own segment, reading that segment of every peer's
//                   input piece by piece into a cache-sized scratch (inputs in rank order, so the
//                   bits do not depend on who computes them). Each reduced piece reaches the
//                   peers' outputs one of two ways:
//                     hand-off (large messages, when the arena has rings): the piece is reduced
//                     into this rank's ring in the arena and every peer copies it out into its
//                     own output, streaming (non-temporal) stores on both sides; nobody writes
//                     into another process. On this 2-core machine that is 1.2-1.3x the
//                     bandwidth of pushing at 16-256 MiB: a user-space copy out of a warm slot
//                     runs at about twice process_vm_writev's speed, and streaming stores skip
//                     reading the outputs' lines first. In groups small enough for the arena's
//                     staging rings the inputs come the same way: every rank copies its input
//                     for a peer's segment into the staging ring for that peer, which reduces
//                     from there, so the path makes no system call at all.
//                     push (otherwise): written into every peer's output with
//                     process_vm_writev while still in cache (faster while outputs fit in cache).
//   reduce_scatter  the reducing half of that, without the writes.
//   allgather       each rank copies every peer's input into its output.
//   broadcast       every rank copies from the root; reduce: the root reduces every input.
// A rank may return only when the ranks reading or writing its buffers say they are finished.
// A rank that fails marks itself abandoned first, and nobody copies to or from the buffers of
// an abandoned rank (see LeaveSafely): a peer that stalled and resumes after the others gave up
// on it fails instead of writing into memory they have reused.
//
// Why in-place calls are safe: the only rank that reads segment s of anyone's input is s's
// owner, and segment s of a peer's output is written (by the owner pushing, or by the peer
// copying a handed-off piece) only after the owner read that peer's input for the same piece.
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>

#include "../reduction.hpp"
#include "../streaming_copy.hpp"
#include "algorithms.hpp"
#include "shardopt/error.hpp"
#include "shm_arena.hpp"
#include "test_hook.hpp"

namespace shardopt::ucx {
namespace {

// Reduction pieces: one per peer in scratch, small enough to stay in L2 while reduced.
constexpr std::size_t kReducePieceBytes = ShmArena::kRingPieceBytes;
// Hand-off reduces a piece this much at a time, each block streamed to the output while in L1.
constexpr std::size_t kStreamBlockBytes = 8 << 10;
// Hand-offs write the outputs with streaming (non-temporal) stores once the inputs and outputs
// of all the host's ranks (2 n x the buffer) reach this: twice the last-level cache of the
// development machine (8 MiB), i.e. from 4 MiB at 2 ranks. Below that they fit in the caches,
// and streaming stores would push an output out to memory just before the caller reads it. Chosen
// from measurement on the 2-core machine, 2 ranks, streaming vs ordinary stores interleaved:
// 1.24-1.32x at 8 MiB, 1.02-1.62x at 4 MiB, mixed at 2 MiB (docs/collectives.md).
constexpr std::size_t kStreamFromHostBytes = 16 << 20;

struct Context {
    Exchange &ex;
    ShmArena &arena;
    const Call &call;
    int n, r;
    std::uint64_t seq;
    std::size_t elem;
    int given_up_on = -1; // the peer this rank stopped waiting for (it made no progress), if any
    bool timed_out = false; // ... and it stopped because the collective's deadline passed
};

bool stream_outputs(const Context &c) {
    return 2 * std::size_t(c.n) * c.call.count * c.elem >= kStreamFromHostBytes;
}

// Leaves the collective on an error about `peer`: marks this rank abandoned (it touches nobody's
// buffers any more, and nobody may touch its own), then reports the root cause when it is known
// shortly, else Error(code, what).
[[noreturn]] void give_up(Context &c, int peer, ErrorCode code, const std::string &what) {
    c.arena.abandon(c.seq);
    c.ex.fail_from_peer(peer, code, what);
}

std::string peer_left_text(const Context &c, int peer) {
    return describe(c.call) + " (collective #" + std::to_string(c.seq) + ") on rank " + std::to_string(c.r) +
           ": rank " + std::to_string(peer) + " left the collective early (it failed, or gave up waiting for " +
           "this rank)";
}

// Copies between this process's `local` and `remote` in peer's address space, in the
// direction given (write: local to remote). Never touches the buffers of a peer that left the
// collective (ShmArena::abandon): they may be gone, or reused, by now.
void transfer(Context &c, int peer, const ShmArena::Buffers &b, std::uint64_t remote, void *local, std::size_t bytes,
              bool write) {
    auto *dst = static_cast<unsigned char *>(local);
    while (bytes > 0) {
        if (c.arena.abandoned(peer, c.seq)) give_up(c, peer, ErrorCode::invalid_state, peer_left_text(c, peer));
        iovec l{dst, bytes};
        iovec r{reinterpret_cast<void *>(static_cast<std::uintptr_t>(remote)), bytes};
        const ssize_t got = write ? process_vm_writev(pid_t(b.pid), &l, 1, &r, 1, 0)
                                  : process_vm_readv(pid_t(b.pid), &l, 1, &r, 1, 0);
        if (got <= 0) {
            const int err = got < 0 ? errno : EIO;
            if (err == EINTR) continue;
            // ESRCH: the process is gone; EFAULT: it left the collective (failed, or is exiting)
            // and its buffer went with it. Either way the peer, not this rank, failed.
            const std::string what = describe(c.call) + " on rank " + std::to_string(c.r) +
                                     (write ? ": writing rank " : ": reading rank ") + std::to_string(peer) +
                                     "'s buffer failed (" +
                                     std::strerror(err) + "): rank " + std::to_string(peer) +
                                     (err == ESRCH ? " was lost" : " left the collective");
            give_up(c, peer, err == ESRCH || err == EFAULT ? ErrorCode::peer_lost : ErrorCode::internal, what);
        }
        c.ex.comm().count_sent(std::size_t(got));
        dst += got;
        remote += std::uint64_t(got);
        bytes -= std::size_t(got);
    }
    test_hook::stop_point(test_hook::cma, c.seq);
}

void read_from(Context &c, int peer, const ShmArena::Buffers &b, std::uint64_t remote, void *local,
               std::size_t bytes) {
    transfer(c, peer, b, remote, local, bytes, false);
}

// Copies a hand-off piece into an output: streaming stores for outputs larger than the caches.
void output_copy(void *dst, const void *src, std::size_t bytes, bool stream) {
    if (stream)
        streaming_copy(dst, src, bytes);
    else
        std::memcpy(dst, src, bytes);
}

// out[0..m) = inputs[0..n) reduced in rank order; with stream_to also copied there, a block at
// a time so the copies (streaming stores for large outputs) overlap the next block's loads.
void reduce_into(const Context &c, const void *const *inputs, std::size_t m, unsigned char *out,
                 unsigned char *stream_to) {
    if (!stream_to) {
        reduce_inputs(inputs, c.n, out, m, c.call.dtype, c.call.op);
        return;
    }
    const bool stream = stream_outputs(c);
    const std::size_t block = kStreamBlockBytes / c.elem;
    const void *at_block[ShmArena::kMaxRanks];
    for (std::size_t i = 0; i < m; i += block) {
        const std::size_t k = std::min(block, m - i);
        for (int p = 0; p < c.n; ++p) at_block[p] = static_cast<const unsigned char *>(inputs[p]) + i * c.elem;
        reduce_inputs(at_block, c.n, out + i * c.elem, k, c.call.dtype, c.call.op);
        output_copy(stream_to + i * c.elem, out + i * c.elem, k * c.elem, stream);
    }
}

// out[0..m) = the ranks' inputs at element `at` (rank p's at p's `input` buffer, this rank's at
// `mine`) reduced in rank order, reading the peers' through scratch.
void reduce_piece(Context &c, std::size_t at, std::size_t m, const unsigned char *mine,
                  std::uint64_t ShmArena::Buffers::*input, unsigned char *out, unsigned char *scratch,
                  std::size_t piece, unsigned char *stream_to = nullptr) {
    const void *inputs[ShmArena::kMaxRanks];
    for (int p = 0; p < c.n; ++p) {
        if (p == c.r) {
            inputs[p] = mine;
            continue;
        }
        unsigned char *slot = scratch + std::size_t(p) * piece * c.elem;
        const auto &b = c.arena.buffers(p, c.seq);
        read_from(c, p, b, b.*input + at * c.elem, slot, m * c.elem);
        inputs[p] = slot;
    }
    reduce_into(c, inputs, m, out, stream_to);
}

// out[0..count) = the ranks' inputs at `offset`, reduced piece by piece; with push_to_peers
// each reduced piece is also written to every peer's output at the same place.
void reduce_from_all(Context &c, std::size_t offset, std::size_t count, const unsigned char *mine,
                     std::uint64_t ShmArena::Buffers::*input, unsigned char *out, bool push_to_peers) {
    const std::size_t piece = std::max<std::size_t>(1, kReducePieceBytes / c.elem);
    unsigned char *scratch = c.ex.comm().scratch(0, std::size_t(c.n) * piece * c.elem);
    for (std::size_t done = 0; done < count; done += piece) {
        const std::size_t m = std::min(piece, count - done);
        reduce_piece(c, offset + done, m, mine + done * c.elem, input, out + done * c.elem, scratch, piece);
        // Allreduce: hand the piece to every peer while it is still in cache (each peer's copy
        // of this segment is written only here, after this rank read that peer's input for it).
        if (push_to_peers)
            for (int k = 1; k < c.n; ++k) {
                const int p = (c.r + k) % c.n;
                const auto &b = c.arena.buffers(p, c.seq);
                transfer(c, p, b, b.recv + (offset + done) * c.elem, out + done * c.elem, m * c.elem, true);
            }
    }
}

// Every rank decides the same: the comm's values were agreed when the arena attached. Without cma (the ranks may not read each other's buffers), only with staged inputs.
bool hand_off_applicable(const UcxComm &comm, const Call &call, const Segments &segs, std::size_t elem) {
    // From Tuning::handoff_bytes, agreed by the ranks when the arena attached.
    if (!comm.arena()->has_rings() || call.count * elem < comm.handoff_bytes() || ShmArena::kRingPieceBytes % elem ||
        (!comm.cma() && !comm.stage_inputs()))
        return false;
    const std::size_t piece = ShmArena::kRingPieceBytes / elem;
    return (segs.max_count + piece - 1) / piece <= ShmArena::kRingMaxPieces;
}

// Allreduce by hand-off (see the top of the file). Each rank runs one loop that copies out
// whatever its peers have produced, stages its input for the peers whose staging rings have
// room, and produces its next piece when its inputs are there and its ring has room (every peer
// has copied out the piece that last used the slot); it sleeps only when it can do none of
// these, so no two ranks can wait on each other. Every rank's progress is in the arena's
// counters, so a rank can also tell what a peer is waiting for: a stuck rank follows that chain
// to the rank that could go on but does not (holding_up()).
class HandOff {
  public:
    HandOff(Context &c, const Segments &segs, const unsigned char *in, unsigned char *out)
        : c_(c), arena_(c.arena), segs_(segs), in_(in), out_(out), piece_(ShmArena::kRingPieceBytes / c.elem),
          staging_(c.ex.comm().stage_inputs()), stream_(stream_outputs(c)) {
        if (!staging_) scratch_ = c.ex.comm().scratch(0, std::size_t(c.n) * piece_ * c.elem);
    }

    void run() {
        while (!done()) {
            leave_if_a_peer_left();
            bool progressed = take_ready();
            if (staging_) progressed |= stage_ready();
            if (can_make(c_.r)) {
                make_next();
                progressed = true;
            }
            if (!progressed) wait_for_progress();
        }
        if (stream_) streaming_fence(); // the outputs' streaming stores are visible before the caller's next store
    }

  private:
    std::uint64_t pieces_of(int p) const {
        return std::uint64_t((segs_.count[std::size_t(p)] + piece_ - 1) / piece_);
    }
    std::size_t elements_of(int p, std::uint64_t i) const {
        return std::min(piece_, segs_.count[std::size_t(p)] - std::size_t(i) * piece_);
    }
    std::size_t offset_of(int p, std::uint64_t i) const {
        return (segs_.offset[std::size_t(p)] + std::size_t(i) * piece_) * c_.elem;
    }
    // Any rank's progress, from the arena (this rank's own counters are published as it goes).
    std::uint64_t made(int x) const { return arena_.produced(x, c_.seq); }
    std::uint64_t taken(int x, int p) const { return arena_.consumed(x, p, c_.seq); }
    std::uint64_t staged(int x, int p) const { return arena_.staged(x, p, c_.seq); }

    bool done() const {
        if (made(c_.r) < pieces_of(c_.r)) return false;
        for (int p = 0; p < c_.n; ++p)
            if (p != c_.r && taken(c_.r, p) < pieces_of(p)) return false;
        return true; // staging is done too: every peer made every piece, so it had every input
    }

    // The rank x's next piece waits for (a consumer that has not copied out the piece in the
    // slot it needs, or a rank that has not staged its input for it), -1 when it waits for
    // nobody, or x made every piece.
    int make_blocker(int x) const {
        const std::uint64_t m = made(x);
        if (m >= pieces_of(x)) return -1;
        for (int q = 0; q < c_.n; ++q)
            if (q != x && taken(q, x) + ShmArena::kRingSlots <= m) return q;
        if (staging_)
            for (int q = 0; q < c_.n; ++q)
                if (q != x && staged(q, x) <= m) return q;
        return -1;
    }
    bool can_make(int x) const { return made(x) < pieces_of(x) && make_blocker(x) < 0; }
    bool can_take(int x, int p) const {
        const std::uint64_t t = taken(x, p);
        return t < pieces_of(p) && made(p) > t;
    }
    bool can_stage(int x, int p) const {
        const std::uint64_t s = staged(x, p);
        return staging_ && s < pieces_of(p) && s < made(p) + ShmArena::kStageSlots;
    }
    bool could_progress(int x) const {
        if (can_make(x)) return true;
        for (int p = 0; p < c_.n; ++p)
            if (p != x && (can_take(x, p) || can_stage(x, p))) return true;
        return false;
    }
    // Whom x waits for when it can do nothing: the rank holding back its next piece, else a
    // producer still owing it pieces; -1 when none.
    int waits_for(int x) const {
        if (made(x) < pieces_of(x)) return make_blocker(x);
        for (int k = 1; k < c_.n; ++k) {
            const int p = (x + k) % c_.n;
            if (taken(x, p) < pieces_of(p)) return p;
        }
        return -1;
    }

    // A peer that left (failed, or gave up on this rank) will never finish its part; and a rank
    // that was stopped and resumes after the others left must not write into the rings again.
    void leave_if_a_peer_left() {
        for (int p = 0; p < c_.n; ++p)
            if (p != c_.r && arena_.abandoned(p, c_.seq))
                give_up(c_, p, ErrorCode::invalid_state, peer_left_text(c_, p));
    }

    // Copies out every piece the peers have ready; true when there was one.
    bool take_ready() {
        bool any = false;
        for (int k = 1; k < c_.n; ++k) {
            const int p = (c_.r + k) % c_.n;
            for (std::uint64_t t = taken(c_.r, p); can_take(c_.r, p); any = true) {
                const std::size_t bytes = elements_of(p, t) * c_.elem;
                output_copy(out_ + offset_of(p, t), arena_.ring_piece(p, t), bytes, stream_);
                c_.ex.comm().count_sent(bytes); // p's reduced piece, moved out of its ring
                arena_.set_consumed(c_.seq, p, ++t);
            }
        }
        return any;
    }

    // Copies this rank's input for each peer's segment into the staging ring for that peer, as
    // far as the ring has room; true when there was room. Plain stores: the peer reads the piece
    // soon, from cache.
    bool stage_ready() {
        bool any = false;
        for (int k = 1; k < c_.n; ++k) {
            const int p = (c_.r + k) % c_.n;
            for (std::uint64_t s = staged(c_.r, p); can_stage(c_.r, p); any = true) {
                const std::size_t bytes = elements_of(p, s) * c_.elem;
                std::memcpy(arena_.stage_piece(c_.r, p, s), in_ + offset_of(p, s), bytes);
                c_.ex.comm().count_sent(bytes); // this rank's input for p's segment, moved to p
                arena_.set_staged(c_.seq, p, ++s);
                test_hook::stop_point(test_hook::cma, c_.seq);
            }
        }
        return any;
    }

    // Reduces this rank's next piece into its ring (streaming it into its own output as well):
    // the peers' inputs from their staging rings, or read from their buffers.
    void make_next() {
        const std::uint64_t i = made(c_.r);
        const std::size_t m = elements_of(c_.r, i), at = offset_of(c_.r, i);
        unsigned char *slot = arena_.ring_piece(c_.r, i);
        if (staging_) {
            const void *inputs[ShmArena::kMaxRanks];
            for (int q = 0; q < c_.n; ++q)
                inputs[q] = q == c_.r ? static_cast<const void *>(in_ + at) : arena_.stage_piece(q, c_.r, i);
            reduce_into(c_, inputs, m, slot, out_ + at);
        } else {
            reduce_piece(c_, at / c_.elem, m, in_ + at, &ShmArena::Buffers::send, slot, scratch_, piece_, out_ + at);
        }
        arena_.set_produced(c_.seq, i + 1);
        test_hook::stop_point(test_hook::cma, c_.seq);
    }

    // The rank this one waits for in the end: follows the chain of ranks each waiting for the
    // next to the first that could go on but does not (a stopped rank stalls everyone downstream
    // of it, and it is the one to name). This rank itself when it could go on now.
    // A rank that left on a timeout is passed over to the rank it timed out on: its peers'
    // deadlines pass at about the same moment, and each names the stalled rank itself.
    int holding_up() const {
        int awaited = waits_for(c_.r);
        if (awaited < 0) return c_.r;
        for (int hops = 0; hops < 2 * c_.n; ++hops) {
            int next;
            if (arena_.abandoned(awaited, c_.seq))
                next = arena_.timed_out_on(awaited, c_.seq);
            else if (could_progress(awaited))
                break;
            else
                next = waits_for(awaited);
            if (next < 0 || next == c_.r) break;
            awaited = next;
        }
        return awaited;
    }
    // Sleeps until this rank can go on, or the rank holding it up left (run() then leaves too).
    // The culprit is asked again while waiting: a rank that could go on when the wait began may
    // itself be stuck behind the stopped one by the deadline, and naming it would blame the
    // wrong rank. Other peers leaving do not end the wait: one that timed out on the same
    // culprit leaves at about the same moment, and this rank reports the culprit itself.
    void wait_for_progress() {
        const auto ready = [&] { return could_progress(c_.r) || arena_.abandoned(holding_up(), c_.seq); };
        try {
            c_.ex.wait_for_peer([&] { return holding_up(); }, ready);
        } catch (const Error &e) {
            c_.given_up_on = holding_up();
            c_.timed_out = e.code() == ErrorCode::timeout;
            throw;
        }
    }

    Context &c_;
    ShmArena &arena_;
    const Segments &segs_;
    const unsigned char *in_;
    unsigned char *out_;
    const std::size_t piece_;
    const bool staging_;
    const bool stream_; // outputs written with streaming stores (larger than the caches)
    unsigned char *scratch_ = nullptr;
};

// Waits until `peer` is done with this rank's buffers. A peer that left early (abandoned) did
// not finish its part of the collective: that fails this rank too.
void wait_finished(Context &c, int peer) {
    try {
        c.ex.wait_for_peer(peer, [&] { return c.arena.finished(peer, c.seq); });
    } catch (const Error &e) {
        c.given_up_on = peer; // timed out on it, or an abort notice came while waiting for it
        c.timed_out = e.code() == ErrorCode::timeout;
        throw;
    }
    if (c.arena.abandoned(peer, c.seq)) give_up(c, peer, ErrorCode::invalid_state, peer_left_text(c, peer));
}

// Leaving on an error: mark this rank abandoned (done with the others' buffers, and its own are
// off limits: peers check before every copy), then wait (bounded) until every live peer is done
// with this rank's buffers, since one may be in the middle of a copy into its output; only then
// may the caller reuse that memory. Live peers see the mark within one copy, or are finished
// already. The peer this rank gave up waiting for (it made no progress within the timeout: a
// stopped or hung process) gets only a short grace: waiting longer would not make it safer, as
// it may stay stopped for ever; when it resumes it finds the mark before its next copy and
// fails instead (only a process stopped between that check and the copy itself could still
// write late).
class LeaveSafely {
  public:
    explicit LeaveSafely(Context &c) : c_(c), exceptions_(std::uncaught_exceptions()) {}
    ~LeaveSafely() {
        if (std::uncaught_exceptions() == exceptions_) return; // normal exit: waited already
        ShmArena &arena = c_.arena;
        arena.abandon(c_.seq, c_.timed_out ? c_.given_up_on : -1);
        auto &comm = c_.ex.comm();
        const auto now = Clock::now();
        const auto until = now + std::min<Clock::duration>(comm.timeout(), std::chrono::seconds(10));
        const auto grace = now + std::chrono::milliseconds(50);
        for (int p = 0; p < c_.n; ++p) {
            if (p == c_.r) continue;
            const auto done = [&] { return arena.finished(p, c_.seq) || comm.worker().lost(comm.world_rank_of(p)); };
            const auto limit = p == c_.given_up_on ? grace : until;
            while (!done() && Clock::now() < limit) arena.sleep_unless(p, done, std::chrono::milliseconds(1));
        }
    }

  private:
    Context &c_;
    int exceptions_;
};

} // namespace

bool cma_applicable(const Call &call, const UcxComm &comm) {
    if (!comm.cma())
        return call.kind == CallKind::allreduce && call.count > 0 &&
               hand_off_applicable(comm, call, even_segments(call.count, comm.size()), dtype_size(call.dtype));
    switch (call.kind) {
    case CallKind::allreduce:
    case CallKind::reduce_scatter:
    case CallKind::allgather:
    case CallKind::broadcast:
    case CallKind::reduce: return call.count > 0;
    default: return false;
    }
}

void cma_collective(Exchange &ex) {
    ex.wait_headers(); // every rank's buffers are known, and every call agrees
    ShmArena &arena = *ex.arena();
    const Call &call = ex.call();
    Context c{ex, arena, call, ex.size(), ex.rank(), ex.headers()[ex.rank()].seq, dtype_size(call.dtype)};
    auto *out = static_cast<unsigned char *>(call.recv);
    const auto *in = static_cast<const unsigned char *>(call.send);
    const std::size_t bytes = call.count * c.elem;
    LeaveSafely leave_safely(c);
    switch (call.kind) {
    case CallKind::allreduce: {
        const Segments segs = even_segments(call.count, c.n);
        if (hand_off_applicable(ex.comm(), call, segs, c.elem)) {
            HandOff(c, segs, in, out).run();
            break;
        }
        const std::size_t mine = segs.offset[c.r];
        reduce_from_all(c, mine, segs.count[c.r], in + mine * c.elem, &ShmArena::Buffers::send, out + mine * c.elem,
                        true);
        break;
    }
    case CallKind::reduce_scatter:
        reduce_from_all(c, std::size_t(c.r) * call.count, call.count, in + std::size_t(c.r) * bytes,
                        &ShmArena::Buffers::send, out, false);
        break;
    case CallKind::allgather:
        for (int k = 0; k < c.n; ++k) {
            const int p = (c.r + k) % c.n;
            unsigned char *dst = out + std::size_t(p) * bytes;
            if (p == c.r) {
                if (dst != in) std::memmove(dst, in, bytes);
            } else {
                const auto &b = arena.buffers(p, c.seq);
                read_from(c, p, b, b.send, dst, bytes);
            }
        }
        break;
    case CallKind::broadcast:
        if (c.r != call.root) {
            const auto &b = arena.buffers(call.root, c.seq);
            read_from(c, call.root, b, b.recv, out, bytes);
        }
        break;
    case CallKind::reduce:
        if (c.r == call.root) reduce_from_all(c, 0, call.count, in, &ShmArena::Buffers::send, out, false);
        break;
    default: throw Error(ErrorCode::internal, "cma: unexpected call kind");
    }
    // Done with everyone else's buffers; wait for those reading ours.
    arena.set_finished(c.seq);
    if (call.kind == CallKind::broadcast || call.kind == CallKind::reduce) {
        const bool readers_are_others = (call.kind == CallKind::broadcast) == (c.r == call.root);
        if (!readers_are_others) return;
        if (call.kind == CallKind::broadcast) {
            for (int p = 0; p < c.n; ++p)
                if (p != c.r) wait_finished(c, p);
        } else {
            wait_finished(c, call.root);
        }
        return;
    }
    for (int p = 0; p < c.n; ++p)
        if (p != c.r) wait_finished(c, p);
}

} // namespace shardopt::ucx

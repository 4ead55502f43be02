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
//                     reading the outputs' lines first.
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

struct Context {
    Exchange &ex;
    ShmArena &arena;
    const Call &call;
    int n, r;
    std::uint64_t seq;
    std::size_t elem;
    int given_up_on = -1; // the peer this rank stopped waiting for (it made no progress), if any
};

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
    if (!stream_to) {
        reduce_inputs(inputs, c.n, out, m, c.call.dtype, c.call.op);
        return;
    }
    // A block at a time, so the streaming stores overlap the next block's loads.
    const std::size_t block = kStreamBlockBytes / c.elem;
    const void *at_block[ShmArena::kMaxRanks];
    for (std::size_t i = 0; i < m; i += block) {
        const std::size_t k = std::min(block, m - i);
        for (int p = 0; p < c.n; ++p) at_block[p] = static_cast<const unsigned char *>(inputs[p]) + i * c.elem;
        reduce_inputs(at_block, c.n, out + i * c.elem, k, c.call.dtype, c.call.op);
        streaming_copy(stream_to + i * c.elem, out + i * c.elem, k * c.elem);
    }
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

bool hand_off_applicable(const ShmArena &arena, const Call &call, const Segments &segs, std::size_t elem) {
    // Streaming stores pay off once the outputs no longer fit in cache (Tuning::handoff_bytes).
    const std::size_t min_bytes = Tuning::get().handoff_bytes;
    if (!arena.has_rings() || call.count * elem < min_bytes || ShmArena::kRingPieceBytes % elem)
        return false;
    const std::size_t piece = ShmArena::kRingPieceBytes / elem;
    return (segs.max_count + piece - 1) / piece <= ShmArena::kRingMaxPieces;
}

// Allreduce by hand-off (see the top of the file). Each rank runs one loop that copies out
// whatever its peers have produced and produces its next piece when its ring has room (every
// peer has copied out the piece that last used the slot); it sleeps only when it can do
// neither, so no two ranks can wait on each other.
void reduce_and_hand_off(Context &c, const Segments &segs, const unsigned char *in, unsigned char *out) {
    ShmArena &arena = c.arena;
    const std::size_t piece = ShmArena::kRingPieceBytes / c.elem;
    unsigned char *scratch = c.ex.comm().scratch(0, std::size_t(c.n) * piece * c.elem);
    const auto pieces_of = [&](int p) { return std::uint64_t((segs.count[std::size_t(p)] + piece - 1) / piece); };
    const auto elements_of = [&](int p, std::uint64_t i) {
        return std::min(piece, segs.count[std::size_t(p)] - std::size_t(i) * piece);
    };
    std::uint64_t made = 0;                           // pieces of this rank's segment produced
    std::uint64_t taken[ShmArena::kRingMaxRanks] = {}; // pieces copied out of each peer's ring
    const std::uint64_t to_make = pieces_of(c.r);

    // The consumer holding back producer x's ring (x's next piece needs a slot that consumer
    // has not copied out yet), or -1.
    const auto holding_back = [&](int x) {
        const std::uint64_t x_made = x == c.r ? made : arena.produced(x, c.seq);
        if (x_made >= pieces_of(x)) return -1;
        for (int q = 0; q < c.n; ++q)
            if (q != x && arena.consumed(q, x, c.seq) + ShmArena::kRingSlots <= x_made) return q;
        return -1;
    };
    const auto can_make = [&] { return made < to_make && holding_back(c.r) < 0; };
    const auto can_take = [&](int p) { return taken[p] < pieces_of(p) && arena.produced(p, c.seq) > taken[p]; };
    const auto done = [&] {
        if (made < to_make) return false;
        for (int p = 0; p < c.n; ++p)
            if (p != c.r && taken[p] < pieces_of(p)) return false;
        return true;
    };

    while (!done()) {
        bool progressed = false;
        for (int k = 1; k < c.n; ++k) {
            const int p = (c.r + k) % c.n;
            for (; can_take(p); progressed = true) {
                const std::size_t at = segs.offset[std::size_t(p)] + std::size_t(taken[p]) * piece;
                streaming_copy(out + at * c.elem, arena.ring_piece(p, taken[p]), elements_of(p, taken[p]) * c.elem);
                arena.set_consumed(c.seq, p, ++taken[p]);
            }
        }
        if (can_make()) {
            const std::size_t m = elements_of(c.r, made);
            const std::size_t at = segs.offset[std::size_t(c.r)] + std::size_t(made) * piece;
            unsigned char *slot = arena.ring_piece(c.r, made);
            reduce_piece(c, at, m, in + at * c.elem, &ShmArena::Buffers::send, slot, scratch, piece, out + at * c.elem);
            arena.set_produced(c.seq, ++made);
            progressed = true;
        }
        if (progressed) continue;
        // Stuck: wait for the consumer holding back this rank's ring, else for a producer still
        // owing pieces; and if that rank is itself held back by a consumer, for that one, and so
        // on: a stopped rank stalls everyone downstream of it, and it is the one to name.
        int awaited = made < to_make ? holding_back(c.r) : -1;
        for (int k = 1; awaited < 0 && k < c.n; ++k) {
            const int p = (c.r + k) % c.n;
            if (taken[p] < pieces_of(p)) awaited = p;
        }
        if (awaited < 0) continue; // a consumer caught up since can_make() was asked
        for (int hops = 0; hops < c.n; ++hops) {
            const int q = holding_back(awaited);
            if (q < 0 || q == c.r) break;
            awaited = q;
        }
        const auto ready = [&] {
            if (can_make() || arena.abandoned(awaited, c.seq)) return true;
            for (int p = 0; p < c.n; ++p)
                if (p != c.r && can_take(p)) return true;
            return false;
        };
        try {
            c.ex.wait_for_peer(awaited, ready);
        } catch (...) {
            c.given_up_on = awaited;
            throw;
        }
        if (arena.abandoned(awaited, c.seq)) give_up(c, awaited, ErrorCode::invalid_state, peer_left_text(c, awaited));
    }
    streaming_fence(); // the outputs' streaming stores are visible before the caller's next store
}

// Waits until `peer` is done with this rank's buffers. A peer that left early (abandoned) did
// not finish its part of the collective: that fails this rank too.
void wait_finished(Context &c, int peer) {
    try {
        c.ex.wait_for_peer(peer, [&] { return c.arena.finished(peer, c.seq); });
    } catch (...) {
        c.given_up_on = peer; // timed out on it, or an abort notice came while waiting for it
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
        arena.abandon(c_.seq);
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

bool cma_applicable(const Call &call) {
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
        if (hand_off_applicable(arena, call, segs, c.elem)) {
            reduce_and_hand_off(c, segs, in, out);
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

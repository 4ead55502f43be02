// Large collectives among the ranks of one host, copying straight out of each other's buffers
// (process_vm_readv: one copy, no staging, no message protocol). Every rank published its buffer
// addresses with its header in the arena; then:
//   allreduce       each rank reduces its own segment, reading that segment of every peer's
//                   input piece by piece into a cache-sized scratch (inputs in rank order, so the
//                   bits do not depend on who computes them), publishing how far it got; then it
//                   copies every other segment from its owner's output as the owner's progress
//                   allows.
//   reduce_scatter  the first half of that; allgather the second, from the peers' inputs.
//   broadcast       every rank copies from the root; reduce: the root reduces every input.
// A rank may return only when the ranks reading its buffers say they are finished with them.
//
// Why in-place calls are safe: a rank overwrites a segment of its own buffer that peers read
// (allreduce, segment p) only after p's progress says p has read (and reduced) that part.
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "../reduction.hpp"
#include "algorithms.hpp"
#include "shardopt/error.hpp"
#include "shm_arena.hpp"

namespace shardopt::ucx {
namespace {

// Reduction pieces: one per peer in scratch, small enough to stay in L2 while reduced.
constexpr std::size_t kReducePieceBytes = 128 << 10;
// Copies are gated by the owner's progress; read at most this much per call.
constexpr std::size_t kCopyPieceBytes = 4 << 20;

void read_from(Exchange &ex, int peer, const ShmArena::Buffers &b, std::uint64_t remote, void *local,
               std::size_t bytes) {
    auto *dst = static_cast<unsigned char *>(local);
    while (bytes > 0) {
        iovec l{dst, bytes};
        iovec r{reinterpret_cast<void *>(static_cast<std::uintptr_t>(remote)), bytes};
        const ssize_t got = process_vm_readv(pid_t(b.pid), &l, 1, &r, 1, 0);
        if (got <= 0) {
            const int err = got < 0 ? errno : EIO;
            if (err == EINTR) continue;
            // ESRCH: the process is gone; EFAULT: it left the collective (failed, or is exiting)
            // and its buffer went with it. Either way the peer, not this rank, failed.
            const std::string what = describe(ex.call()) + " on rank " + std::to_string(ex.rank()) +
                                     ": reading rank " + std::to_string(peer) + "'s buffer failed (" +
                                     std::strerror(err) + "): rank " + std::to_string(peer) +
                                     (err == ESRCH ? " was lost" : " left the collective");
            ex.fail_from_peer(peer, err == ESRCH || err == EFAULT ? ErrorCode::peer_lost : ErrorCode::internal, what);
        }
        dst += got;
        remote += std::uint64_t(got);
        bytes -= std::size_t(got);
    }
}

struct Context {
    Exchange &ex;
    const ShmArena &arena;
    const Call &call;
    int n, r;
    std::uint64_t seq;
    std::size_t elem;
};

// out[0..count) = the ranks' inputs at `offset` (rank p's at p's `input_base`, this rank's at
// `mine`), reduced in rank order piece by piece; progress, when asked, counts elements done.
void reduce_from_all(Context &c, std::size_t offset, std::size_t count, const unsigned char *mine,
                     std::uint64_t ShmArena::Buffers::*input, unsigned char *out, bool publish_progress) {
    const std::size_t piece = std::max<std::size_t>(1, kReducePieceBytes / c.elem);
    unsigned char *scratch = c.ex.comm().scratch(0, std::size_t(c.n) * piece * c.elem);
    const void *inputs[ShmArena::kMaxRanks];
    ShmArena &arena = *c.ex.arena();
    for (std::size_t done = 0; done < count; done += piece) {
        const std::size_t m = std::min(piece, count - done);
        for (int p = 0; p < c.n; ++p) {
            if (p == c.r) {
                inputs[p] = mine + done * c.elem;
                continue;
            }
            unsigned char *slot = scratch + std::size_t(p) * piece * c.elem;
            const auto &b = c.arena.buffers(p, c.seq);
            read_from(c.ex, p, b, b.*input + (offset + done) * c.elem, slot, m * c.elem);
            inputs[p] = slot;
        }
        reduce_inputs(inputs, c.n, out + done * c.elem, m, c.call.dtype, c.call.op);
        if (publish_progress) arena.set_progress(c.seq, done + m);
    }
}

// dst[0..count) = rank `owner`'s output at `offset`, copied as its progress allows.
void copy_when_ready(Context &c, int owner, std::size_t offset, std::size_t count, unsigned char *dst) {
    const std::size_t piece = std::max<std::size_t>(1, kCopyPieceBytes / c.elem);
    const auto &b = c.arena.buffers(owner, c.seq);
    std::size_t done = 0;
    while (done < count) {
        std::uint64_t ready = c.arena.progress(owner, c.seq);
        if (ready <= done) {
            c.ex.wait_for_peer(owner, [&] { return c.arena.progress(owner, c.seq) > done; });
            ready = c.arena.progress(owner, c.seq);
        }
        const std::size_t m = std::min<std::size_t>({piece, std::size_t(ready) - done, count - done});
        read_from(c.ex, owner, b, b.recv + (offset + done) * c.elem, dst + done * c.elem, m * c.elem);
        done += m;
    }
}

void wait_finished(Context &c, int peer) {
    c.ex.wait_for_peer(peer, [&] { return c.arena.finished(peer, c.seq); });
}

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
    switch (call.kind) {
    case CallKind::allreduce: {
        const Segments segs = even_segments(call.count, c.n);
        const std::size_t mine = segs.offset[c.r];
        reduce_from_all(c, mine, segs.count[c.r], in + mine * c.elem, &ShmArena::Buffers::send, out + mine * c.elem,
                        true);
        for (int k = 1; k < c.n; ++k) { // start with the next rank, so owners are read evenly
            const int p = (c.r + k) % c.n;
            copy_when_ready(c, p, segs.offset[p], segs.count[p], out + segs.offset[p] * c.elem);
        }
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
                read_from(ex, p, b, b.send, dst, bytes);
            }
        }
        break;
    case CallKind::broadcast:
        if (c.r != call.root) {
            const auto &b = arena.buffers(call.root, c.seq);
            read_from(ex, call.root, b, b.recv, out, bytes);
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

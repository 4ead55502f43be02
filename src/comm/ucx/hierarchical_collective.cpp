// Collectives over ranks on several hosts, each host holding the same number L of ranks
// (UcxComm::hierarchy()): the work inside a host goes through that host's own communicator
// (its shared-memory arena and cross-process copies), and the inter-host part is split across
// all L local ranks, so every rank of a host drives its own slice over the network at once:
// local rank l runs the inter-host part for slice l with local rank l of every other host (the
// "cross" communicator of local rank l). Per host, each byte crosses the network once per
// inter-host step instead of once per rank pair on a flat ring.
//   allreduce       local reduce-scatter (slice l, summed over the host), inter-host allreduce of
//                   the slice, local allgather of the slices
//   reduce_scatter  local reduce-scatter of the segments owned by cross group l (the input
//                   reordered so they are contiguous), then inter-host reduce-scatter
//   allgather       inter-host allgather of the inputs of cross group l, then local allgather,
//                   then reordered into rank order
//   broadcast       the root's host broadcasts locally, each of its ranks sends its slice to the
//                   other hosts, and they assemble the slices with a local allgather
// The inter-host step picks its algorithm as the flat one does, by the size it moves (the
// slice): recursive doubling for allreduces up to Tuning::small_bytes, else the pipelined ring;
// broadcasts a pipelined binomial tree. The reduction order is fixed for a given layout of ranks
// on hosts (host partials in local-rank order, then hosts in host order), and every rank gets
// the same bits: each slice is reduced once by its cross group. avg reduces as sum and divides
// once, by the world size, at the end.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "../finish_quietly.hpp"
#include "../reduction.hpp"
#include "algorithms.hpp"
#include "shardopt/error.hpp"

namespace shardopt::ucx {
namespace {

// Scratch slots of the parent communicator (its own algorithms do not run during these calls).
constexpr int kSlotA = 4, kSlotB = 5;

struct Hier {
    UcxComm &comm;
    const Call &call;
    const HostLayout &layout;
    Communicator &local, &cross;
    int hosts, per_host, h, l;
    std::size_t elem;
    ReduceOp op; // the op the steps use (avg: sum)
};

// Runs body, naming the step in an error (which ranks ran it: the sub-communicator's ranks are
// numbered within it).
template <typename Body>
void named(Hier &x, Communicator &sub, const std::string &what, const Body &body) {
    try {
        body();
    } catch (const Error &e) {
        const bool local = &sub == &x.local;
        throw Error(e.code(), describe(x.call) + " on rank " + std::to_string(x.comm.rank()) + ", " + what +
                                  (local ? " among the ranks of host " + std::to_string(x.h)
                                         : " among local rank " + std::to_string(x.l) + " of every host") +
                                  ": " + e.what());
    }
}

// Runs one step on a sub-communicator, adding what it moved to this communicator's bytes_sent.
template <typename Step>
void step(Hier &x, Communicator &sub, const char *what, const Step &body) {
    const std::uint64_t before = sub.bytes_sent();
    try {
        named(x, sub, what, body);
    } catch (...) {
        x.comm.count_sent(std::size_t(sub.bytes_sent() - before));
        throw;
    }
    x.comm.count_sent(std::size_t(sub.bytes_sent() - before));
}

// Whether rank r's segment order (hosts inside local ranks) is already rank order: the
// reordering copies of reduce_scatter and allgather are then skipped.
bool local_major(const Hier &x) {
    for (int lr = 0; lr < x.per_host; ++lr)
        for (int hr = 0; hr < x.hosts; ++hr)
            if (x.layout.rank_at(hr, lr) != lr * x.hosts + hr) return false;
    return true;
}

void finish_avg(Hier &x, void *buf, std::size_t count) {
    if (x.call.op == ReduceOp::avg) divide_by_count(buf, count, x.call.dtype, x.comm.size());
}

// The pieces of an allreduce of `padded` elements through the hierarchy, `per_piece` elements
// each (the last one shorter; all multiples of L). Every rank issues the same calls in the same
// order on each sub-communicator: on the host's, RS(0), RS(1), AG(0), RS(2), AG(1), ...; across
// hosts AR(0), AR(1), ... , AR(k) once RS(k) is in and AG(k) once AR(k) is.
void pipelined_allreduce(Hier &x, const unsigned char *in, unsigned char *out, unsigned char *slice, std::size_t padded,
                         std::size_t per_piece, std::size_t pieces) {
    const std::size_t L = std::size_t(x.per_host);
    auto first = [&](std::size_t k) { return k * per_piece; };
    auto length = [&](std::size_t k) { return std::min(per_piece, padded - first(k)); };
    std::vector<WorkPtr> reduced(pieces), crossed(pieces), gathered(pieces);
    const std::uint64_t before = x.local.bytes_sent() + x.cross.bytes_sent();
    auto reduce = [&](std::size_t k) {
        reduced[k] = x.local.reduce_scatter_async(in + first(k) * x.elem, slice + first(k) / L * x.elem, length(k) / L,
                                                  x.call.dtype, x.op);
    };
    auto await = [&](WorkPtr &w, Communicator &sub, const char *what, std::size_t k) {
        named(x, sub, what + (" of piece " + std::to_string(k) + " of " + std::to_string(pieces)), [&] { w->wait(); });
    };
    // What the host and cross communicators moved, on this one's count (the steps overlap).
    auto count = [&] { x.comm.count_sent(std::size_t(x.local.bytes_sent() + x.cross.bytes_sent() - before)); };
    try {
        reduce(0);
        for (std::size_t k = 0; k <= pieces; ++k) {
            if (k < pieces) {
                await(reduced[k], x.local, "reduce-scatter", k);
                crossed[k] = x.cross.allreduce_async(slice + first(k) / L * x.elem, slice + first(k) / L * x.elem,
                                                     length(k) / L, x.call.dtype, x.op);
            }
            if (k + 1 < pieces) reduce(k + 1);
            if (k >= 1) {
                await(crossed[k - 1], x.cross, "allreduce", k - 1);
                gathered[k - 1] = x.local.allgather_async(slice + first(k - 1) / L * x.elem, out + first(k - 1) * x.elem,
                                                          length(k - 1) / L, x.call.dtype);
            }
        }
        for (std::size_t k = 0; k < pieces; ++k) await(gathered[k], x.local, "allgather", k);
    } catch (...) {
        // Nothing may still read the input or write the scratch and output once the caller moves on.
        for (auto *works : {&reduced, &crossed, &gathered})
            for (auto &w : *works) finish_quietly(w);
        count();
        throw;
    }
    count();
}

void allreduce(Hier &x) {
    const std::size_t count = x.call.count, each = (count + std::size_t(x.per_host) - 1) / std::size_t(x.per_host);
    const std::size_t padded = each * std::size_t(x.per_host);
    auto *recv = static_cast<unsigned char *>(x.call.recv);
    const unsigned char *in = static_cast<const unsigned char *>(x.call.send);
    unsigned char *whole = recv; // where the local allgather assembles the result
    if (padded != count) {
        // The slices must be equal: pad the input (the padding is reduced and dropped).
        whole = x.comm.scratch(kSlotA, padded * x.elem);
        std::memcpy(whole, in, count * x.elem);
        std::memset(whole + count * x.elem, 0, (padded - count) * x.elem);
        in = whole;
    }
    unsigned char *slice = x.comm.scratch(kSlotB, each * x.elem);
    // Pieces of the (padded) buffer, each a multiple of L elements, run as separate hierarchical
    // allreduces in a pipeline, so the link carries piece k while the host reduces piece k + 1
    // and gathers piece k - 1. Piece k's slice sits at its offset / L in `slice`.
    const std::size_t per_piece = x.comm.hier_piece_bytes() / x.elem / std::size_t(x.per_host) * std::size_t(x.per_host);
    const std::size_t pieces = per_piece == 0 ? 1 : (padded + per_piece - 1) / per_piece;
    if (pieces <= 1) {
        step(x, x.local, "reduce-scatter", [&] { x.local.reduce_scatter(in, slice, each, x.call.dtype, x.op); });
        step(x, x.cross, "allreduce", [&] { x.cross.allreduce(slice, slice, each, x.call.dtype, x.op); });
        step(x, x.local, "allgather", [&] { x.local.allgather(slice, whole, each, x.call.dtype); });
    } else {
        pipelined_allreduce(x, in, whole, slice, padded, per_piece, pieces);
    }
    if (whole != recv) std::memcpy(recv, whole, count * x.elem);
    finish_avg(x, recv, count);
}

void reduce_scatter(Hier &x) {
    const std::size_t each = x.call.count, seg = each * x.elem;
    const auto *send = static_cast<const unsigned char *>(x.call.send);
    const unsigned char *in = send;
    if (!local_major(x)) {
        // Segments of the ranks of cross group l' next to each other, hosts in order.
        auto *ordered = x.comm.scratch(kSlotA, seg * std::size_t(x.comm.size()));
        for (int lr = 0; lr < x.per_host; ++lr)
            for (int hr = 0; hr < x.hosts; ++hr)
                std::memcpy(ordered + std::size_t(lr * x.hosts + hr) * seg,
                            send + std::size_t(x.layout.rank_at(hr, lr)) * seg, seg);
        in = ordered;
    }
    unsigned char *partial = x.comm.scratch(kSlotB, seg * std::size_t(x.hosts));
    const std::size_t group = each * std::size_t(x.hosts);
    step(x, x.local, "reduce-scatter", [&] { x.local.reduce_scatter(in, partial, group, x.call.dtype, x.op); });
    step(x, x.cross, "reduce-scatter", [&] { x.cross.reduce_scatter(partial, x.call.recv, each, x.call.dtype, x.op); });
    finish_avg(x, x.call.recv, each);
}

void allgather(Hier &x) {
    const std::size_t each = x.call.count, seg = each * x.elem;
    auto *recv = static_cast<unsigned char *>(x.call.recv);
    unsigned char *group = x.comm.scratch(kSlotB, seg * std::size_t(x.hosts));
    step(x, x.cross, "allgather", [&] { x.cross.allgather(x.call.send, group, each, x.call.dtype); });
    const bool direct = local_major(x);
    unsigned char *all = direct ? recv : x.comm.scratch(kSlotA, seg * std::size_t(x.comm.size()));
    step(x, x.local, "allgather", [&] { x.local.allgather(group, all, each * std::size_t(x.hosts), x.call.dtype); });
    if (!direct)
        for (int lr = 0; lr < x.per_host; ++lr)
            for (int hr = 0; hr < x.hosts; ++hr)
                std::memcpy(recv + std::size_t(x.layout.rank_at(hr, lr)) * seg,
                            all + std::size_t(lr * x.hosts + hr) * seg, seg);
}

void broadcast(Hier &x) {
    const std::size_t count = x.call.count, each = (count + std::size_t(x.per_host) - 1) / std::size_t(x.per_host);
    const std::size_t padded = each * std::size_t(x.per_host);
    const int root = x.call.root, root_host = x.layout.host_of[std::size_t(root)];
    auto *buf = static_cast<unsigned char *>(x.call.recv);
    // Slice l: elements [l*each, min(count, (l+1)*each)), the same offsets padded or not.
    const std::size_t from = std::min(count, std::size_t(x.l) * each);
    const std::size_t mine = std::min(count, from + each) - from;
    if (x.h == root_host) {
        step(x, x.local, "broadcast", [&] {
            x.local.broadcast(buf, count, x.call.dtype, x.layout.local_rank_of[std::size_t(root)]);
        });
        step(x, x.cross, "broadcast", [&] { x.cross.broadcast(buf + from * x.elem, mine, x.call.dtype, root_host); });
        return;
    }
    unsigned char *whole = padded == count ? buf : x.comm.scratch(kSlotA, padded * x.elem);
    unsigned char *slice = x.comm.scratch(kSlotB, each * x.elem);
    step(x, x.cross, "broadcast", [&] { x.cross.broadcast(slice, mine, x.call.dtype, root_host); });
    step(x, x.local, "allgather", [&] { x.local.allgather(slice, whole, each, x.call.dtype); });
    if (whole != buf) std::memcpy(buf, whole, count * x.elem);
}

} // namespace

bool hierarchical_applicable(const Call &call, const UcxComm &comm) {
    if (!comm.hierarchy() || call.count == 0) return false;
    switch (call.kind) {
    case CallKind::allreduce:
    case CallKind::reduce_scatter:
    case CallKind::allgather:
    case CallKind::broadcast: return true;
    default: return false;
    }
}

void hierarchical_collective(UcxComm &comm, const Call &call) {
    const UcxComm::Hierarchy &hy = *comm.hierarchy();
    const HostLayout &layout = hy.layout;
    const int r = comm.rank();
    Hier x{comm,
           call,
           layout,
           *hy.local,
           *hy.cross,
           layout.hosts(),
           int(layout.members.front().size()),
           layout.host_of[std::size_t(r)],
           layout.local_rank_of[std::size_t(r)],
           dtype_size(call.dtype),
           call.op == ReduceOp::avg ? ReduceOp::sum : call.op};
    switch (call.kind) {
    case CallKind::allreduce: return allreduce(x);
    case CallKind::reduce_scatter: return reduce_scatter(x);
    case CallKind::allgather: return allgather(x);
    case CallKind::broadcast: return broadcast(x);
    default: throw Error(ErrorCode::internal, "hierarchical: unexpected call kind");
    }
}

} // namespace shardopt::ucx

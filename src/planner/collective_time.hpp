// The alpha-beta time of the library's collectives (src/comm/ucx), per rank, and the bytes each
// rank sends inside its host and between hosts.
//
// Inside one host, CPU ranks (host memory) go through the shared-memory paths: the arena up to
// 64 KiB (a latency), the cross-process copies and the hand-off rings above it, whose cost is the
// bytes the collective reads and writes through memory over all ranks (allreduce (3n-1) S,
// reduce_scatter (n+1) S, allgather 2n S: collectives.md) at the host's copy bandwidth (intra).
// GPUs on one host: a ring over intra (NVLink). Between hosts: the ring (2(p-1) steps of S/p for
// an allreduce, p-1 for the others) or recursive doubling up to 64 KiB, each step paying the link's
// latency; the L ranks of a host driving their slices at once share its link. Where every host
// holds L >= 2 ranks the library runs hierarchically: host reduce-scatter, the slice across the
// hosts, host allgather, an allreduce as a pipeline of pieces sized as hier_piece.hpp sizes them
// from the link's speed.
#pragma once

#include <cstdint>

#include "shardopt/planner.hpp"

namespace shardopt::planner {

enum class Collective { allreduce, reduce_scatter, allgather, alltoall };

// A group of ranks: `hosts` hosts with `per_host` ranks each (the library's layout: block).
struct Group {
    int hosts = 1;
    int per_host = 1;
    bool hierarchical = true; // SHARDOPT_HIERARCHY: off runs the flat ring over every rank
    int ranks() const noexcept { return hosts * per_host; }
};

struct Cost {
    double seconds = 0.0;
    double sent_intra = 0.0, sent_inter = 0.0; // bytes one rank sends
    Cost &operator+=(const Cost &o) {
        seconds += o.seconds, sent_intra += o.sent_intra, sent_inter += o.sent_inter;
        return *this;
    }
};

// bytes: an allreduce's buffer, a reduce_scatter's input, an allgather's output (all ranks'),
// an alltoall's payloads of one rank (to everyone else).
Cost collective_cost(const Cluster &cluster, Collective kind, double bytes, const Group &group);

// The hierarchical allreduce's piece for a group spanning hosts (bytes), as the library probes it.
double hierarchical_piece_bytes(const Cluster &cluster, const Group &group);

} // namespace shardopt::planner

#include "collective_time.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "../comm/ucx/hier_piece.hpp"

namespace shardopt::planner {
namespace {

constexpr double kSmallBytes = 64 << 10; // Tuning::small_bytes, ShmArena::kCapacity

// n ranks of one host. CPU ranks: the shared-memory paths, a latency per call (scaled when ranks
// outnumber the cores: every wait is a scheduler round) and the memory traffic at the host's copy
// bandwidth (its crowded one when ranks outnumber the cores). GPUs: a ring over NVLink.
Cost one_host(const Cluster &c, Collective kind, double bytes, int n) {
    Cost cost;
    if (n <= 1 || bytes <= 0) return cost;
    const double per = double(n - 1) / n;
    switch (kind) {
    case Collective::allreduce: cost.sent_intra = 2 * per * bytes; break;
    case Collective::reduce_scatter:
    case Collective::allgather: cost.sent_intra = per * bytes; break;
    case Collective::alltoall: cost.sent_intra = bytes; break;
    }
    if (c.memory == MemorySpace::cuda) {
        const double steps = kind == Collective::allreduce ? 2.0 * (n - 1) : kind == Collective::alltoall ? 1.0 : n - 1.0;
        cost.seconds = steps * c.intra.latency + cost.sent_intra / c.intra.bandwidth;
        return cost;
    }
    double traffic = 0.0; // bytes through memory over all ranks (collectives.md, "Measuring")
    switch (kind) {
    case Collective::allreduce: traffic = (3.0 * n - 1.0) * bytes; break;
    case Collective::reduce_scatter: traffic = (n + 1.0) * bytes; break;
    case Collective::allgather: traffic = 2.0 * n * bytes; break;
    case Collective::alltoall: traffic = 2.0 * n * bytes; break;
    }
    const int cores = c.cores_per_host > 0 ? c.cores_per_host : n;
    const double crowd = std::max(1.0, double(n) / cores);
    const bool small = bytes / n <= kSmallBytes && c.intra.small_latency > 0; // in the arena
    // Ranks outnumbering the cores copy in turns: the bandwidth measured that way, where known.
    const double bandwidth = n > cores && c.intra.crowded_bandwidth > 0 ? c.intra.crowded_bandwidth : c.intra.bandwidth;
    cost.seconds = (small ? c.intra.small_latency : c.intra.latency) * crowd + traffic / bandwidth;
    return cost;
}

// p participants over the links between hosts, `share` of them on each host link at once.
Cost across_hosts(const Cluster &c, Collective kind, double bytes, int p, int share) {
    Cost cost;
    if (p <= 1 || bytes <= 0) return cost;
    // `share` flows on a host's link split it; one alone gets what a single flow can.
    double bw = c.inter.bandwidth / std::max(1, share);
    if (share <= 1 && c.inter.single_flow_bandwidth > 0) bw = std::min(bw, c.inter.single_flow_bandwidth);
    const double a = c.inter.latency;
    switch (kind) {
    case Collective::allreduce:
        if (bytes <= kSmallBytes) { // recursive doubling; a non-power of two folds the extra ranks in first
            const int rounds = int(std::ceil(std::log2(double(p)))) + ((p & (p - 1)) != 0 ? 1 : 0);
            const double small = c.inter.small_latency > 0 ? c.inter.small_latency : a;
            cost.seconds = rounds * (small + bytes / bw);
            cost.sent_inter = rounds * bytes;
        } else {
            cost.seconds = 2.0 * (p - 1) * (a + bytes / p / bw);
            cost.sent_inter = 2.0 * (p - 1) / p * bytes;
        }
        break;
    case Collective::reduce_scatter:
    case Collective::allgather:
        cost.seconds = (p - 1) * (a + bytes / p / bw);
        cost.sent_inter = double(p - 1) / p * bytes;
        break;
    case Collective::alltoall:
        cost.seconds = (p - 1) * a + bytes / bw;
        cost.sent_inter = bytes;
        break;
    }
    return cost;
}

} // namespace

double hierarchical_piece_bytes(const Cluster &c, const Group &g) {
    // The probe: every local rank allreduces 1 MiB across the hosts at once, timed.
    const double probe = double(ucx::kHierProbeBytes);
    const double seconds = across_hosts(c, Collective::allreduce, probe, g.hosts, g.per_host).seconds;
    return double(ucx::hier_piece_for_link(ucx::kHierProbeBytes, g.hosts, g.per_host, seconds));
}

Cost collective_cost(const Cluster &c, Collective kind, double bytes, const Group &g) {
    if (g.ranks() <= 1 || bytes <= 0) return {};
    if (g.hosts <= 1) return one_host(c, kind, bytes, g.per_host);
    if (!g.hierarchical || g.per_host == 1 || kind == Collective::alltoall) {
        // The flat algorithms over every rank: each ring step waits for the slowest edge, a host's link.
        const int n = g.ranks();
        Cost cost = across_hosts(c, kind, bytes, n, 1);
        if (kind == Collective::alltoall) { // payloads to ranks of other hosts share the link, the others memory
            const double others = double(n - g.per_host) / std::max(1, n - 1);
            cost = across_hosts(c, kind, bytes * others, g.hosts, g.per_host);
            cost += one_host(c, kind, bytes * (1.0 - others), g.per_host);
            return cost;
        }
        // a host's ranks on the ring: one edge of the L leaves the host
        cost.sent_intra = cost.sent_inter * (g.per_host - 1) / g.per_host;
        cost.sent_inter /= g.per_host;
        return cost;
    }
    const int L = g.per_host, H = g.hosts;
    switch (kind) {
    case Collective::allreduce: {
        const double piece = hierarchical_piece_bytes(c, g);
        const double pieces = std::ceil(bytes / piece);
        auto stage = [&](double b) {
            return std::array<Cost, 3>{one_host(c, Collective::reduce_scatter, b, L),
                                       across_hosts(c, Collective::allreduce, b / L, H, L),
                                       one_host(c, Collective::allgather, b, L)};
        };
        Cost total;
        if (pieces <= 1) {
            for (const Cost &s : stage(bytes)) total += s;
            return total;
        }
        const auto s = stage(piece);
        // Piece k crosses the hosts while the host reduces piece k + 1 and gathers piece k - 1.
        total.seconds = s[0].seconds + s[1].seconds + s[2].seconds +
                        (pieces - 1) * std::max(s[1].seconds, s[0].seconds + s[2].seconds);
        for (const Cost &x : s) total.sent_intra += x.sent_intra * pieces, total.sent_inter += x.sent_inter * pieces;
        return total;
    }
    case Collective::reduce_scatter: {
        Cost total = one_host(c, Collective::reduce_scatter, bytes, L);
        total += across_hosts(c, Collective::reduce_scatter, bytes / L, H, L);
        return total;
    }
    case Collective::allgather: {
        Cost total = across_hosts(c, Collective::allgather, bytes / L, H, L);
        total += one_host(c, Collective::allgather, bytes, L);
        return total;
    }
    case Collective::alltoall: break;
    }
    return {};
}

double collective_seconds(const Cluster &cluster, const std::string &kind, std::uint64_t bytes, int hosts,
                          int ranks_per_host, bool hierarchical) {
    const Collective k = kind == "reduce_scatter" ? Collective::reduce_scatter
                         : kind == "allgather"    ? Collective::allgather
                                                  : Collective::allreduce;
    return collective_cost(cluster, k, double(bytes), Group{hosts, ranks_per_host, hierarchical}).seconds;
}

} // namespace shardopt::planner

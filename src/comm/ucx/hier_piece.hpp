// The piece size of the pipelined hierarchical allreduce, from a probe of the links between
// hosts. A piece crosses the hosts as a ring of 2 (H - 1) steps, each a wait for the previous
// host, so each piece pays a fixed cost per step, which wants long pieces; but a long piece also
// leaves the link idle for longer around it (2 x 2 hosts at 1 Gbit/s: 512 KiB pieces reach 98%
// of the link, 4 MiB 87%; 4 x 2: 1 MiB 88-94%, 4 MiB 82%, 512 KiB 70-78%; at 10 Gbit/s, 2 x 2,
// 4 MiB beats 1 MiB by 1.5x). What fits them all is a piece that keeps the link busy for about
// kHierStepLinkTime per ring step, so the size follows the link's measured speed and the hosts'
// number. 2.75 ms: a 1 Gbit/s link cannot carry more than 687 KB in one piece between 2 hosts
// (or 1.4 MB between 4), which rounds to 512 KiB (1 MiB) however fast the probe went.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace shardopt::ucx {

// Tuning::hier_piece_bytes when nobody set SHARDOPT_UCX_HIER_PIECE_BYTES: probe at attach.
constexpr std::size_t kHierPieceAuto = ~std::size_t(0);
constexpr std::size_t kHierPieceMin = std::size_t(256) << 10, kHierPieceMax = std::size_t(16) << 20;
constexpr double kHierStepLinkTime = 2.75e-3; // seconds of link per piece and ring step
// What each rank allreduces across the hosts in the probe (all of a host's ranks at once).
constexpr std::size_t kHierProbeBytes = std::size_t(1) << 20;

// The probe: each of the per_host ranks of every one of `hosts` hosts allreduced probe_bytes
// across the hosts at the same time, the slowest in `seconds`. A piece of P bytes puts
// P / per_host on each of them, so it keeps the links busy for P * seconds / (per_host *
// probe_bytes). The result is a power of two (nearby speeds give the same pieces) within
// [kHierPieceMin, kHierPieceMax].
inline std::size_t hier_piece_for_link(std::size_t probe_bytes, int hosts, int per_host, double seconds) {
    if (!(seconds > 0)) return kHierPieceMax; // too fast to time: the pieces' cost dominates
    const double link_time = kHierStepLinkTime * 2.0 * double(std::max(hosts - 1, 1));
    const double raw = link_time * double(per_host) * double(probe_bytes) / seconds;
    const double rounded = std::exp2(std::round(std::log2(std::max(raw, 1.0))));
    return std::clamp(std::size_t(rounded), kHierPieceMin, kHierPieceMax);
}

} // namespace shardopt::ucx

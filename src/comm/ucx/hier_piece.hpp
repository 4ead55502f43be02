// The piece size of the pipelined hierarchical allreduce, from a probe of the links between
// hosts. Pieces pay a fixed cost each (two host steps, a few messages and waits), so they must not
// be short; but on a slow link a long piece leaves the link idle between pieces for longer
// (2 x 2 hosts at 1 Gbit/s: 512 KiB pieces reach 98% of the link, 4 MiB 87%; at 10 Gbit/s
// 4 MiB beats 1 MiB by 1.5x). What works at both is a piece that keeps the link busy for about
// kHierPieceLinkTime, so the size follows the link's measured speed. 5.5 ms: a 1 Gbit/s link
// between two hosts cannot carry more than 687 KB in it, which rounds to 512 KiB however fast
// the probe went; 10 Gbit/s gives 4-8 MiB.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace shardopt::ucx {

// Tuning::hier_piece_bytes when nobody set SHARDOPT_UCX_HIER_PIECE_BYTES: probe at attach.
constexpr std::size_t kHierPieceAuto = ~std::size_t(0);
constexpr std::size_t kHierPieceMin = std::size_t(256) << 10, kHierPieceMax = std::size_t(16) << 20;
constexpr double kHierPieceLinkTime = 5.5e-3; // seconds of link per piece
// What each rank allreduces across the hosts in the probe (all of a host's ranks at once).
constexpr std::size_t kHierProbeBytes = std::size_t(1) << 20;

// The probe: each of the per_host ranks of every host allreduced probe_bytes across the hosts at
// the same time, the slowest in `seconds`. A piece of P bytes puts P / per_host on each of them,
// so it keeps the links busy for P * seconds / (per_host * probe_bytes). The result is a power of
// two (nearby speeds give the same pieces) within [kHierPieceMin, kHierPieceMax].
inline std::size_t hier_piece_for_link(std::size_t probe_bytes, int per_host, double seconds) {
    if (!(seconds > 0)) return kHierPieceMax; // too fast to time: the pieces' cost dominates
    const double raw = kHierPieceLinkTime * double(per_host) * double(probe_bytes) / seconds;
    const double rounded = std::exp2(std::round(std::log2(std::max(raw, 1.0))));
    return std::clamp(std::size_t(rounded), kHierPieceMin, kHierPieceMax);
}

} // namespace shardopt::ucx

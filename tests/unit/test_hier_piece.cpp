// The hierarchical allreduce's piece size from the probe of the links (src/comm/ucx/hier_piece.hpp):
// the sizes measured best on shaped links come out of the probe times those links give.
#define BOOST_TEST_MODULE shardopt hier piece
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <limits>

#include "comm/ucx/hier_piece.hpp"

using namespace shardopt::ucx;

namespace {

constexpr std::size_t KiB = 1024, MiB = 1024 * 1024;

// How long the probe takes when the link is the only limit: each of the host's ranks allreduces
// kHierProbeBytes across `hosts` hosts (a ring: 2 (H - 1) / H of it leaves each rank).
double link_bound_seconds(double bytes_per_second, int hosts, int per_host) {
    return double(per_host) * double(kHierProbeBytes) * 2.0 * (hosts - 1) / hosts / bytes_per_second;
}

bool power_of_two(std::size_t x) { return x && !(x & (x - 1)); }

} // namespace

BOOST_AUTO_TEST_CASE(one_gbit_gets_short_pieces_however_fast_the_probe_went) {
    // 2 x 2 hosts at 1 Gbit/s: 512 KiB pieces reached 98% of the link, 4 MiB 87%.
    for (double slower : {1.0, 1.2, 1.4})
        BOOST_TEST(hier_piece_for_link(kHierProbeBytes, 2, 2, slower * link_bound_seconds(125e6, 2, 2)) == 512 * KiB);
    // 4 x 2 at 1 Gbit/s: 1 MiB pieces reached 88-94%, 4 MiB 82%, 512 KiB 70-78% (a piece's
    // ring has three times the steps).
    for (double slower : {1.0, 1.2, 1.4})
        BOOST_TEST(hier_piece_for_link(kHierProbeBytes, 4, 2, slower * link_bound_seconds(125e6, 4, 2)) == 1 * MiB);
}

BOOST_AUTO_TEST_CASE(more_hosts_mean_more_ring_steps_per_piece_and_longer_pieces) {
    const double gbit = 125e6;
    std::size_t previous = 0;
    for (int hosts : {2, 4, 8, 16}) {
        const std::size_t piece = hier_piece_for_link(kHierProbeBytes, hosts, 2, link_bound_seconds(gbit, hosts, 2));
        BOOST_TEST(piece >= previous);
        previous = piece;
    }
    BOOST_TEST(previous > hier_piece_for_link(kHierProbeBytes, 2, 2, link_bound_seconds(gbit, 2, 2)));
}

BOOST_AUTO_TEST_CASE(ten_gbit_gets_long_pieces) {
    // At 10 Gbit/s 4 MiB pieces beat 1 MiB ones by 1.5x (the pieces' fixed cost).
    const std::size_t at_line_rate = hier_piece_for_link(kHierProbeBytes, 2, 2, link_bound_seconds(1.25e9, 2, 2));
    BOOST_TEST(at_line_rate >= 4 * MiB);
    BOOST_TEST(hier_piece_for_link(kHierProbeBytes, 2, 2, 2 * link_bound_seconds(1.25e9, 2, 2)) == 4 * MiB);
}

BOOST_AUTO_TEST_CASE(pieces_are_powers_of_two_within_bounds_and_shrink_as_the_link_slows) {
    std::size_t previous = kHierPieceMax;
    for (double seconds = 1e-6; seconds < 10; seconds *= 1.1) {
        const std::size_t piece = hier_piece_for_link(kHierProbeBytes, 2, 2, seconds);
        BOOST_TEST(power_of_two(piece));
        BOOST_TEST(piece >= kHierPieceMin);
        BOOST_TEST(piece <= kHierPieceMax);
        BOOST_TEST(piece <= previous);
        previous = piece;
    }
    BOOST_TEST(hier_piece_for_link(kHierProbeBytes, 2, 2, 1e-6) == kHierPieceMax);
    BOOST_TEST(hier_piece_for_link(kHierProbeBytes, 1, 2, 10.0) == kHierPieceMin); // no ring: as 2 hosts
    BOOST_TEST(hier_piece_for_link(kHierProbeBytes, 2, 2, 10.0) == kHierPieceMin);
}

BOOST_AUTO_TEST_CASE(a_probe_too_fast_to_time_gives_the_longest_pieces) {
    BOOST_TEST(hier_piece_for_link(kHierProbeBytes, 2, 2, 0.0) == kHierPieceMax);
    BOOST_TEST(hier_piece_for_link(kHierProbeBytes, 2, 2, -1.0) == kHierPieceMax);
    BOOST_TEST(hier_piece_for_link(kHierProbeBytes, 2, 2, std::numeric_limits<double>::quiet_NaN()) == kHierPieceMax);
}

BOOST_AUTO_TEST_CASE(a_piece_is_shared_by_the_hosts_ranks) {
    // The same probe time with twice the ranks per host means twice the link speed per piece byte.
    const double seconds = 0.02;
    BOOST_TEST(hier_piece_for_link(kHierProbeBytes, 2, 4, seconds) == 2 * hier_piece_for_link(kHierProbeBytes, 2, 2, seconds));
}

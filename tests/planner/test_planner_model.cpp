// planner.model: the time model's terms that the profile feeds, each checked against its formula.
// Crowded hosts: where a host's CPU ranks outnumber its cores, the one-host collectives move their
// bytes at the profile's crowded bandwidth (calibrated with two ranks per core), not at the one
// measured with a core per rank.
#define BOOST_TEST_MODULE planner_model
#include <boost/test/unit_test.hpp>

#include "shardopt/error.hpp"
#include "shardopt/planner.hpp"

using namespace shardopt;
using namespace shardopt::planner;

namespace {

Cluster two_cores() {
    Cluster c;
    c.ranks_per_host = 8;
    c.cores_per_host = 2;
    c.intra.latency = 2e-4;
    c.intra.bandwidth = 22e9;
    c.intra.crowded_bandwidth = 12e9;
    c.update_bandwidth = 2e10;
    return c;
}

constexpr std::uint64_t kBytes = 32u << 20;

} // namespace

BOOST_AUTO_TEST_CASE(a_core_per_rank_moves_at_the_uncrowded_bandwidth) {
    const Cluster c = two_cores();
    // 2 ranks on 2 cores: (3n - 1) S through memory at 22 GB/s, one latency
    const double want = c.intra.latency + 5.0 * double(kBytes) / c.intra.bandwidth;
    BOOST_TEST(collective_seconds(c, "allreduce", kBytes, 1, 2, true) == want, boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(ranks_outnumbering_cores_move_at_the_crowded_bandwidth) {
    const Cluster c = two_cores();
    for (int n : {4, 8}) {
        const double crowd = n / 2.0; // every wait a scheduler round
        const double want = c.intra.latency * crowd + (3.0 * n - 1.0) * double(kBytes) / c.intra.crowded_bandwidth;
        BOOST_TEST(collective_seconds(c, "allreduce", kBytes, 1, n, true) == want, boost::test_tools::tolerance(1e-12));
    }
    // allgather: 2 n S through memory
    const double gather = c.intra.latency * 2.0 + 8.0 * double(kBytes) / c.intra.crowded_bandwidth;
    BOOST_TEST(collective_seconds(c, "allgather", kBytes, 1, 4, true) == gather, boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(a_profile_without_a_crowded_figure_keeps_the_one_bandwidth) {
    Cluster c = two_cores();
    c.intra.crowded_bandwidth = 0.0;
    const double want = c.intra.latency * 2.0 + 11.0 * double(kBytes) / c.intra.bandwidth;
    BOOST_TEST(collective_seconds(c, "allreduce", kBytes, 1, 4, true) == want, boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(the_profile_carries_the_crowded_bandwidth_and_refuses_a_negative_one) {
    const Cluster c = cluster_from_json(
        R"({"hosts": 1, "ranks_per_host": 4, "cores_per_host": 2, "update": {"bandwidth_Bps": 2e10},
            "intra": {"latency_s": 1e-4, "bandwidth_Bps": 2e10, "crowded_Bps": 1.1e10}})");
    BOOST_TEST(c.intra.crowded_bandwidth == 1.1e10);
    BOOST_TEST(cluster_from_json(cluster_to_json(c)).intra.crowded_bandwidth == 1.1e10);
    const Cluster bad = cluster_from_json(
        R"({"hosts": 1, "ranks_per_host": 4, "update": {"bandwidth_Bps": 2e10},
            "intra": {"latency_s": 1e-4, "bandwidth_Bps": 2e10, "crowded_Bps": -1}})");
    BOOST_CHECK_EXCEPTION(validate_cluster(bad), Error, [](const Error &e) {
        return std::string(e.what()).find("crowded") != std::string::npos;
    });
}

// Compressed reduction across hosts (hierarchical_chunked_reducer): in-process groups that
// place their ranks on hosts (make_inprocess_group's host_of_ranks) take the path UCX jobs on
// several hosts take. Checked: where compression is lossless the result is uncompressed
// training's bit for bit, for every layout of chunks on hosts and both reduction modes; where it
// is lossy, training still reaches the uncompressed loss with identical replicas; and the
// reducer's memory is the hierarchical one's (so the path really ran), or the flat one's under
// SHARDOPT_HIERARCHY=0.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "sharding_test_support.hpp"
#include "shardopt/inprocess.hpp"
#include "shardopt/sharded_optimizer.hpp"

using namespace shardopt;
using shardopt::testing::assertion_mutex;
using shardopt::testing::expect_error;

namespace {

// Three tensors in three buckets, none a multiple of the world size (padding in every chunk).
ParameterSet three_buckets() {
    ParameterSet layout(DType::f32, 4000);
    layout.add("a", 1003);
    layout.add("b", 517);
    layout.add("c", 2049);
    return layout;
}

// Parameters after `steps` SGD steps whose gradients are small integers (every sum exact in
// f32, every value exact in bf16), on ranks placed on hosts by host_of (empty: one host).
std::vector<std::vector<float>> after_steps(int world, const std::vector<int> &host_of, ShardingOptions options,
                                            int steps = 3) {
    std::vector<std::vector<float>> out{std::size_t(world)};
    std::mutex mutex;
    run_on_ranks(make_inprocess_group(world, host_of), [&](Communicator &comm) {
        const ParameterSet layout = three_buckets();
        OptimizerOptions rule = OptimizerOptions::defaults(OptimizerKind::sgd);
        rule.lr = 0.125;
        std::vector<float> init(1003 + 517 + 2049);
        for (std::size_t i = 0; i < init.size(); ++i) init[i] = float(int(i % 17) - 8);
        auto opt = ShardedOptimizer::create(comm.shared_from_this(), layout, rule, options, init.data());
        for (int step = 0; step < steps; ++step) {
            opt->zero_grad();
            for (int t = 0; t < layout.tensor_count(); ++t) {
                auto *g = static_cast<float *>(opt->grad(t));
                for (std::size_t i = 0; i < layout.tensor(t).count; ++i)
                    g[i] = float(int((i * 7 + std::size_t(t) * 13 + std::size_t(step) * 5) % 23) - 11) * float(comm.rank() + 1);
                opt->grad_ready(opt->layout().tensor(t).bucket); // one tensor per bucket
            }
            opt->step();
        }
        std::vector<float> params(init.size());
        opt->get_parameters(params.data());
        std::lock_guard<std::mutex> lock(mutex);
        out[std::size_t(comm.rank())] = params;
    });
    return out;
}

std::string testing_hosts(const std::vector<int> &host_of) {
    std::string text;
    for (int h : host_of) text += std::to_string(h);
    return text;
}

ShardingOptions with(Strategy s, GradientCompression m, double ratio = 1.0) {
    ShardingOptions o;
    o.strategy = s;
    o.compression.method = m;
    o.compression.ratio = ratio;
    return o;
}

} // namespace

BOOST_AUTO_TEST_SUITE(across_hosts)

// bf16 of small integers and top-k keeping every element are lossless: whatever order the
// hosts' chunks travel in, every rank must end with uncompressed training's parameters.
BOOST_AUTO_TEST_CASE(lossless_methods_equal_uncompressed_training) {
    // Hosts of consecutive ranks (one reduce-scatter per host) and interleaved ones (the chunks
    // reordered in place first), 2 to 4 hosts of 2 to 4 ranks.
    const std::vector<std::vector<int>> layouts = {
        {0, 0, 1, 1}, {0, 1, 0, 1}, {0, 0, 1, 1, 2, 2, 3, 3}, {0, 0, 0, 0, 1, 1, 1, 1}, {0, 1, 2, 3, 3, 2, 1, 0}};
    for (const auto &host_of : layouts) {
        const int world = int(host_of.size());
        for (Strategy s : {Strategy::ddp, Strategy::zero1, Strategy::zero2, Strategy::fsdp}) {
            const auto plain = after_steps(world, {}, with(s, GradientCompression::none));
            for (const auto &[m, ratio] : {std::pair{GradientCompression::bf16, 1.0}, std::pair{GradientCompression::top_k, 1.0}}) {
                BOOST_TEST_CONTEXT("hosts " << testing_hosts(host_of) << ", " << strategy_name(s) << ", " << compression_name(m)) {
                    const auto hosts = after_steps(world, host_of, with(s, m, ratio));
                    for (int r = 0; r < world; ++r) BOOST_TEST(hosts[std::size_t(r)] == plain[0]);
                }
            }
        }
    }
}

// int8 with error feedback across 2 hosts x 2 ranks: replicas identical, runs repeat bit for
// bit, and the parameters stay near uncompressed training's (the residuals carry what the
// payloads missed into later steps instead of losing it).
BOOST_AUTO_TEST_CASE(int8_stays_with_uncompressed_training) {
    const auto plain = after_steps(4, {}, with(Strategy::ddp, GradientCompression::none), 6);
    const auto a = after_steps(4, {0, 0, 1, 1}, with(Strategy::ddp, GradientCompression::int8), 6);
    const auto b = after_steps(4, {0, 0, 1, 1}, with(Strategy::ddp, GradientCompression::int8), 6);
    BOOST_TEST(a[0] == b[0]);
    for (int r = 1; r < 4; ++r) BOOST_TEST(a[std::size_t(r)] == a[0]);
    double worst = 0.0, moved = 0.0;
    std::vector<float> init(a[0].size());
    for (std::size_t i = 0; i < init.size(); ++i) init[i] = float(int(i % 17) - 8);
    for (std::size_t i = 0; i < a[0].size(); ++i) {
        worst = std::max(worst, double(std::fabs(a[0][i] - plain[0][i])));
        moved = std::max(moved, double(std::fabs(plain[0][i] - init[i])));
    }
    BOOST_TEST_MESSAGE("int8 across 2 x 2 hosts: max |diff| " << worst << " where training moved parameters by " << moved);
    BOOST_TEST(worst > 0.0);          // it is lossy: the hierarchical path quantized something
    BOOST_TEST(worst < moved * 0.02); // and error feedback kept it close
}

// The reducer's memory tells which path ran: across 2 x 2 hosts the host sums (H chunks per
// bucket) and the phase-two gathers; with SHARDOPT_HIERARCHY=0 the flat reducer's p payloads.
BOOST_AUTO_TEST_CASE(memory_shows_the_hierarchical_reducer) {
    auto compression_bytes = [](const std::vector<int> &host_of) {
        std::size_t bytes = 0;
        run_on_ranks(make_inprocess_group(4, host_of), [&](Communicator &comm) {
            ParameterSet layout(DType::f32);
            layout.add("w", 1000);
            ShardingOptions o = with(Strategy::ddp, GradientCompression::int8);
            auto opt = ShardedOptimizer::create(comm.shared_from_this(), layout, OptimizerOptions::defaults(OptimizerKind::sgd), o);
            opt->zero_grad();
            opt->step();
            if (comm.rank() == 0) bytes = opt->memory_stats().compression_bytes;
        });
        return bytes;
    };
    const std::size_t padded = 1000, chunk = 250, payload = 4 + 250, hosts = 2, ranks = 4;
    // Residuals (bucket + owned chunk), the sum's chunk, the host sums, H payloads out and in,
    // and phase two's own payload, the cross gather (H) and the host gather (p); interleaved
    // hosts add the chunk of scratch that reorders the bucket.
    const std::size_t hierarchical = (padded + chunk + chunk + hosts * chunk) * 4 + 2 * hosts * payload + payload +
                                     hosts * payload + ranks * payload;
    const std::size_t flat = (padded + chunk + chunk) * 4 + 2 * ranks * payload;
    BOOST_TEST(compression_bytes({0, 0, 1, 1}) == hierarchical);
    BOOST_TEST(compression_bytes({0, 1, 0, 1}) == hierarchical + chunk * 4);
    BOOST_TEST(compression_bytes({}) == flat);
    BOOST_TEST(compression_bytes({0, 0, 0, 1}) == flat); // hosts of different sizes: flat
    ::setenv("SHARDOPT_HIERARCHY", "0", 1);
    const std::size_t opted_out = compression_bytes({0, 0, 1, 1});
    ::unsetenv("SHARDOPT_HIERARCHY");
    BOOST_TEST(opted_out == flat);
}

// A host list that does not name one host per rank is refused, naming both counts.
BOOST_AUTO_TEST_CASE(host_list_of_the_wrong_length_is_refused) {
    expect_error(ErrorCode::invalid_argument, "host_of_ranks names 2 hosts for 4 ranks",
                 [] { make_inprocess_group(4, {0, 1}); });
}

BOOST_AUTO_TEST_SUITE_END()

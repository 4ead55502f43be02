// Sharded training equals single-process training: every strategy, world sizes 1-8, f32 and f64.
#include <boost/test/unit_test.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/data/monomorphic.hpp>

#include <cstring>
#include <ostream>

#include "training.hpp"

using namespace shardopt;
using namespace shardopt::testing;
namespace bdata = boost::unit_test::data;

namespace shardopt {
// Boost.Test prints data-test parameters.
inline std::ostream &operator<<(std::ostream &out, Strategy s) { return out << strategy_name(s); }
} // namespace shardopt

namespace {

ShardingOptions with(Strategy s) {
    ShardingOptions o;
    o.strategy = s;
    return o;
}

const Strategy kStrategies[] = {Strategy::ddp, Strategy::zero1, Strategy::zero2, Strategy::fsdp};
const int kWorldSizes[] = {1, 2, 3, 4, 8};

} // namespace

BOOST_AUTO_TEST_SUITE(equivalence)

BOOST_DATA_TEST_CASE(f32_matches_single_process, bdata::make(kStrategies) * bdata::make(kWorldSizes), strategy, ws) {
    TrainingSetup setup;
    const auto reference = train_single_process<float>(setup);
    const auto sharded = train_distributed<float>(setup, ws, with(strategy));
    const double err = relative_error(sharded, reference);
    BOOST_TEST_INFO(strategy_name(strategy) << " ws=" << ws << " relative error " << err);
    BOOST_TEST(err <= 1e-5);
}

BOOST_DATA_TEST_CASE(f64_matches_single_process, bdata::make(kStrategies) * bdata::make(kWorldSizes), strategy, ws) {
    TrainingSetup setup;
    const auto reference = train_single_process<double>(setup);
    const auto sharded = train_distributed<double>(setup, ws, with(strategy));
    const double err = relative_error(sharded, reference);
    BOOST_TEST_INFO(strategy_name(strategy) << " ws=" << ws << " relative error " << err);
    BOOST_TEST(err <= 1e-12);
}

// The training actually moved: equivalence is not two untouched initializations agreeing.
BOOST_AUTO_TEST_CASE(training_changes_parameters) {
    TrainingSetup setup;
    const auto init = examples::mlp_init<double>(setup.shape);
    const auto trained = train_single_process<double>(setup);
    BOOST_TEST(relative_error(trained, init) > 0.1);
}

BOOST_DATA_TEST_CASE(strategies_bitwise_identical, bdata::make({3, 4}), ws) {
    TrainingSetup setup;
    setup.max_grad_norm = 0.5; // clipping active: the global norm must agree bit for bit too
    const auto ddp = train_distributed<float>(setup, ws, with(Strategy::ddp));
    for (Strategy s : {Strategy::zero1, Strategy::zero2, Strategy::fsdp}) {
        const auto other = train_distributed<float>(setup, ws, with(s));
        BOOST_TEST_INFO(strategy_name(s) << " vs ddp at ws=" << ws);
        BOOST_TEST(std::memcmp(other.data(), ddp.data(), ddp.size() * sizeof(float)) == 0);
    }
}

// Leaving the post-update allgather in flight (overlapping the next forward) changes nothing.
BOOST_AUTO_TEST_CASE(overlapped_param_gather_is_bitwise_identical) {
    TrainingSetup setup;
    setup.steps = 60;
    for (Strategy s : {Strategy::zero1, Strategy::zero2}) {
        auto overlapped = with(s);
        overlapped.overlap_param_gather = true;
        const auto a = train_distributed<float>(setup, 3, with(s));
        const auto b = train_distributed<float>(setup, 3, overlapped);
        BOOST_TEST_INFO(strategy_name(s));
        BOOST_TEST(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
    }
}

BOOST_DATA_TEST_CASE(clipping_matches_single_process, bdata::make(kStrategies), strategy) {
    TrainingSetup setup;
    setup.max_grad_norm = 0.5;
    setup.steps = 60;
    const auto reference = train_single_process<double>(setup);
    const auto sharded = train_distributed<double>(setup, 3, with(strategy));
    BOOST_TEST(relative_error(sharded, reference) <= 1e-12);
}

BOOST_DATA_TEST_CASE(accumulation_matches_single_process, bdata::make(kStrategies), strategy) {
    TrainingSetup setup;
    setup.accumulation = 4;
    setup.steps = 40;
    const auto reference = train_single_process<double>(setup);
    const auto sharded = train_distributed<double>(setup, 2, with(strategy));
    BOOST_TEST(relative_error(sharded, reference) <= 1e-12);
}

BOOST_AUTO_TEST_CASE(every_base_optimizer_through_zero2) {
    for (auto kind : {OptimizerKind::sgd, OptimizerKind::adam, OptimizerKind::adamw, OptimizerKind::rmsprop,
                      OptimizerKind::adagrad, OptimizerKind::lamb}) {
        TrainingSetup setup;
        setup.steps = 50;
        setup.optimizer = OptimizerOptions::defaults(kind);
        if (kind == OptimizerKind::sgd) setup.optimizer.momentum = 0.9;
        const auto reference = train_single_process<double>(setup);
        const auto sharded = train_distributed<double>(setup, 3, with(Strategy::zero2));
        BOOST_TEST_INFO(optimizer_kind_name(kind));
        BOOST_TEST(relative_error(sharded, reference) <= 1e-12);
    }
}

BOOST_AUTO_TEST_SUITE_END()

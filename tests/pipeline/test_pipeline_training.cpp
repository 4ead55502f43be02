// The demo MLP split into 2 and 4 pipeline stages trains, under every schedule, to the
// parameters of single-process training with the same micro-batches (f64, max abs diff <= 1e-12),
// also with 2 data-parallel replicas of each stage (DDP, ZeRO-2, FSDP inside the stage's group).
#include <boost/test/unit_test.hpp>

#include <cmath>

#include "pipeline_training.hpp"

using namespace shardopt;
using namespace shardopt::testing;

namespace {

double max_abs_diff(const std::vector<double> &a, const std::vector<double> &b) {
    if (a.size() != b.size()) return INFINITY;
    double d = 0;
    for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
    return d;
}

PipelineOptions options(PipelineSchedule schedule, int m) {
    PipelineOptions o;
    o.schedule = schedule;
    o.num_micro_batches = m;
    o.virtual_stages = schedule == PipelineSchedule::interleaved_1f1b ? 2 : 1;
    return o;
}

void check(int pp, int dp, Strategy inner, PipelineSchedule schedule, int m, int steps = 60) {
    TrainingSetup setup;
    setup.steps = steps;
    setup.accumulation = m;
    const auto reference = train_single_process<double>(setup);
    PipelineSetup pipe{pp, dp, inner, options(schedule, m)};
    const double diff = max_abs_diff(train_pipeline(setup, pipe), reference);
    BOOST_TEST_MESSAGE("pp=" << pp << " dp=" << dp << " " << strategy_name(inner) << " "
                              << pipeline_schedule_name(schedule) << " m=" << m << ": max abs diff " << diff);
    BOOST_TEST_INFO("pp=" << pp << " dp=" << dp << " " << strategy_name(inner) << " " << pipeline_schedule_name(schedule)
                          << " m=" << m << ": max abs diff " << diff);
    BOOST_TEST(diff <= 1e-12);
}

const PipelineSchedule kSchedules[] = {PipelineSchedule::gpipe, PipelineSchedule::one_f_one_b,
                                       PipelineSchedule::interleaved_1f1b};

} // namespace

BOOST_AUTO_TEST_SUITE(pipeline_training)

BOOST_AUTO_TEST_CASE(two_stages_every_schedule) {
    for (auto s : kSchedules) check(2, 1, Strategy::ddp, s, 4);
}

BOOST_AUTO_TEST_CASE(four_stages_every_schedule) {
    for (auto s : kSchedules) check(4, 1, Strategy::ddp, s, 8);
}

// pp = 2 x dp = 2: each schedule with another strategy inside the stages' data groups.
BOOST_AUTO_TEST_CASE(two_stages_two_replicas) {
    check(2, 2, Strategy::ddp, PipelineSchedule::gpipe, 4);
    check(2, 2, Strategy::zero2, PipelineSchedule::one_f_one_b, 4);
    check(2, 2, Strategy::fsdp, PipelineSchedule::interleaved_1f1b, 4);
    check(2, 2, Strategy::zero1, PipelineSchedule::one_f_one_b, 2);
}

// Clipping sees the norm over every stage's gradients (the optimizer's allreduce over the world).
BOOST_AUTO_TEST_CASE(clipping_over_stages) {
    TrainingSetup setup;
    setup.steps = 30;
    setup.accumulation = 4;
    setup.max_grad_norm = 0.05;
    const auto reference = train_single_process<double>(setup);
    const double diff = max_abs_diff(train_pipeline(setup, {4, 1, Strategy::ddp, options(PipelineSchedule::one_f_one_b, 4)}),
                                     reference);
    BOOST_TEST_INFO("max abs diff " << diff);
    BOOST_TEST(diff <= 1e-12);
}

BOOST_AUTO_TEST_SUITE_END()

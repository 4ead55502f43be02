// Adafactor (src/optim/adafactor.cpp) in the step engine's host memory. Its matrices keep a
// variance per row and per column, which every rank holding part of a matrix keeps whole; a step
// sums |p|^2 and g^2 per row and column over the matrix's parts on every rank, then |u|^2, in two
// rounds of statistics combined across the group. So every strategy and world size trains what
// one process does (to the rounding of those sums' order), and the factored state crosses
// checkpoints to any other world size and strategy.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "rule_training_support.hpp"
#include "sharding_test_support.hpp"
#include "shardopt/inprocess.hpp"
#include "shardopt/sharded_optimizer.hpp"

using namespace shardopt;
using shardopt::testing::assertion_mutex;
using shardopt::testing::expect_error;
using shardopt::testing::Gradients;
using shardopt::testing::initial_values;
using shardopt::testing::train_rank0;
using shardopt::testing::with;

namespace {

// Matrices cut across ranks at rows and in the middle of rows, a vector, and a small bucket size.
ParameterSet adafactor_layout(DType dtype = DType::f32) {
    ParameterSet layout(dtype, 4096);
    layout.add_matrix("w1", 33, 17);
    layout.add("b1", 33);
    layout.add_matrix("w2", 8, 33);
    layout.end_bucket();
    layout.add_matrix("w3", 40, 24);
    return layout;
}

std::size_t elements() {
    ParameterSet layout = adafactor_layout();
    layout.plan(1);
    return layout.element_count();
}

OptimizerOptions adafactor() {
    OptimizerOptions o = OptimizerOptions::defaults(OptimizerKind::adafactor);
    o.lr = 0.02;
    o.weight_decay = 0.01;
    return o;
}

// Rank 0's parameters after steps [first, last] of `strategy` at `ranks` ranks, every rank rank
// 0's gradients; `load`: a checkpoint to start from, `save`: where to put one at the end.
std::vector<float> train(Strategy strategy, int ranks, int first, int last, const std::vector<unsigned char> *load,
                         std::vector<unsigned char> *save = nullptr) {
    return train_rank0({[] { return adafactor_layout(); }, adafactor(), with(strategy), ranks,
                        Gradients::same_on_every_rank, first, last, load, save});
}

double worst_relative(const std::vector<float> &a, const std::vector<float> &b) {
    double worst = 0.0;
    for (std::size_t i = 0; i < a.size(); ++i)
        worst = std::max(worst, std::fabs(double(a[i]) - double(b[i])) / (1e-3 + std::fabs(double(b[i]))));
    return worst;
}

} // namespace

BOOST_AUTO_TEST_SUITE(adafactor_engine)

// Every strategy at 1, 2, 3 and 5 ranks trains what one DDP rank does, to the rounding of the
// row, column and norm sums' order (f32 parameters, sums in double).
BOOST_AUTO_TEST_CASE(every_strategy_and_world_size_trains_as_one_process) {
    const std::vector<float> reference = train(Strategy::ddp, 1, 1, 6, nullptr);
    BOOST_TEST(worst_relative(reference, initial_values(elements())) > 1e-3, "it trained");
    for (int ranks : {1, 2, 3, 5})
        for (Strategy s : {Strategy::ddp, Strategy::zero1, Strategy::zero2, Strategy::fsdp}) {
            const double worst = worst_relative(train(s, ranks, 1, 6, nullptr), reference);
            BOOST_TEST(worst < 1e-6, strategy_name(s) << " x" << ranks << ": " << worst << " from one process");
        }
}

// The factored variances cross a checkpoint: saved by ZeRO-2 at 3 ranks after 3 steps, loaded at
// 2 (FSDP), 5 (ZeRO-1) and 1 (DDP) ranks, 3 more steps end where 6 uninterrupted steps do.
BOOST_AUTO_TEST_CASE(factored_state_crosses_checkpoints) {
    const std::vector<float> reference = train(Strategy::ddp, 1, 1, 6, nullptr);
    std::vector<unsigned char> bytes;
    train(Strategy::zero2, 3, 1, 3, nullptr, &bytes);
    for (const auto &run :
         std::vector<std::pair<int, Strategy>>{{2, Strategy::fsdp}, {5, Strategy::zero1}, {1, Strategy::ddp}}) {
        const double worst = worst_relative(train(run.second, run.first, 4, 6, &bytes), reference);
        BOOST_TEST(worst < 1e-6, strategy_name(run.second) << " x" << run.first << " from the checkpoint: " << worst);
    }
    // Without the variances (a fresh optimizer continuing from the parameters alone) it ends elsewhere.
    BOOST_TEST(worst_relative(train(Strategy::ddp, 1, 4, 6, nullptr), reference) > 1e-3);
}

// A matrix keeps rows + cols variances per holder, a vector one per element: far less than Adam.
BOOST_AUTO_TEST_CASE(state_bytes_are_factored) {
    std::mutex &mutex = assertion_mutex();
    run_inprocess(1, [&](Communicator &comm) {
        auto opt = ShardedOptimizer::create(comm.shared_from_this(), adafactor_layout(), adafactor(), with(Strategy::ddp));
        const std::size_t expected = ((33 + 17) + 33 + (8 + 33) + (40 + 24)) * sizeof(float);
        std::lock_guard<std::mutex> lock(mutex);
        BOOST_TEST(opt->memory_stats().optimizer_state_bytes == expected);
    });
}

// A matrix with one row keeps rows + cols = count + 1 variances, which do not fit its checkpoint slot:
// a save is refused, naming the tensor and what to do.
BOOST_AUTO_TEST_CASE(a_one_row_matrix_cannot_be_saved) {
    run_inprocess(1, [&](Communicator &comm) {
        ParameterSet layout(DType::f32);
        layout.add_matrix("row", 1, 50);
        auto opt = ShardedOptimizer::create(comm.shared_from_this(), layout, adafactor(), with(Strategy::ddp));
        expect_error(ErrorCode::unsupported, "does not fit its checkpoint slot", [&] { opt->serialize(); });
    });
}

BOOST_AUTO_TEST_SUITE_END()

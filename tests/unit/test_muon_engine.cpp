// Muon (src/optim/muon.cpp) in the step engine's host memory: each matrix's momentum is assembled
// whole from the parts its holders keep, orthogonalized (Newton-Schulz) once per step by one owner
// rank of the group, and handed back; AdamW updates the other tensors. The orthogonalization sees
// the same matrix whatever the strategy or world size, so every layout trains the same bits, and
// its state crosses checkpoints to any other.
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
using shardopt::testing::Gradients;
using shardopt::testing::same_bits;
using shardopt::testing::train_rank0;
using shardopt::testing::TrainRun;
using shardopt::testing::initial_values;
using shardopt::testing::with;

namespace {

// Matrices cut across ranks at rows and inside rows, a bias, in two buckets.
ParameterSet muon_layout() {
    ParameterSet layout(DType::f32, 4096);
    layout.add_matrix("w1", 33, 17);
    layout.add("b1", 33);
    layout.add_matrix("w2", 8, 33);
    layout.end_bucket();
    layout.add_matrix("w3", 40, 24);
    return layout;
}

std::size_t elements() {
    ParameterSet layout = muon_layout();
    layout.plan(1);
    return layout.element_count();
}

OptimizerOptions muon() {
    OptimizerOptions o = OptimizerOptions::defaults(OptimizerKind::muon);
    o.lr = 0.02;
    return o;
}

// Rank 0's parameters after steps [first, last]; `same_gradients`: rank 0's (rounded) on every rank,
// else each rank its own.
std::vector<float> train(Strategy strategy, int ranks, int threads, bool same_gradients, int first, int last,
                         const std::vector<unsigned char> *load = nullptr, std::vector<unsigned char> *save = nullptr) {
    TrainRun run{muon_layout, muon(), with(strategy), ranks,
                 same_gradients ? Gradients::same_on_every_rank : Gradients::per_rank, first, last, load, save};
    run.sharding.update_threads = threads;
    return train_rank0(run);
}

} // namespace

BOOST_AUTO_TEST_SUITE(muon_engine)

// DDP, ZeRO-1, ZeRO-2 and FSDP at 1, 2, 3 and 5 ranks, and ZeRO-2 on 3 update threads, train the
// same bits (each rank its own gradients: the average is what every layout steps on).
BOOST_AUTO_TEST_CASE(every_strategy_and_world_size_trains_the_same_bits) {
    for (int ranks : {1, 2, 3, 5}) {
        const std::vector<float> reference = train(Strategy::ddp, ranks, 1, false, 1, 4);
        BOOST_TEST(!same_bits(reference, initial_values(elements())), "it trained");
        for (Strategy s : {Strategy::zero1, Strategy::zero2, Strategy::fsdp})
            BOOST_TEST(same_bits(train(s, ranks, 1, false, 1, 4), reference),
                       strategy_name(s) << " x" << ranks << " differs from ddp");
        BOOST_TEST(same_bits(train(Strategy::zero2, ranks, 3, false, 1, 4), reference),
                   "zero2 x" << ranks << " on 3 update threads differs");
    }
}

// The distributed result is the single-process one: with the same gradients on every rank,
// ZeRO-2 at 5 ranks ends on the bits of one process.
BOOST_AUTO_TEST_CASE(distributed_equals_single_process) {
    BOOST_TEST(same_bits(train(Strategy::zero2, 5, 1, true, 1, 4), train(Strategy::ddp, 1, 1, true, 1, 4)));
}

// The momentum buffers (and AdamW's moments) cross checkpoints: saved by FSDP at 3 ranks after 3
// steps, resumed at 2 (ZeRO-2), 5 (ZeRO-1) and 1 (DDP), bit for bit an uninterrupted run.
BOOST_AUTO_TEST_CASE(state_crosses_checkpoints) {
    const std::vector<float> reference = train(Strategy::ddp, 1, 1, true, 1, 6);
    std::vector<unsigned char> bytes;
    train(Strategy::fsdp, 3, 1, true, 1, 3, nullptr, &bytes);
    for (const auto &run :
         std::vector<std::pair<int, Strategy>>{{2, Strategy::zero2}, {5, Strategy::zero1}, {1, Strategy::ddp}})
        BOOST_TEST(same_bits(train(run.second, run.first, 1, true, 4, 6, &bytes), reference),
                   strategy_name(run.second) << " x" << run.first << " from the checkpoint differs");
}

BOOST_AUTO_TEST_SUITE_END()

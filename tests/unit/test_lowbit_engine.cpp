// Low-bit optimizer state (8-bit and 4-bit, src/optim/lowbit.hpp) in the step engine's host
// memory. Which tensors are quantized and where blocks start come from the whole tensor, and a
// block that chunk boundaries cut is scaled by the maximum over every rank's part, so every
// strategy, world size and update-thread count holds the same codes and trains the same bits.
// The state costs what the format says, and crosses checkpoints as its values.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "lowbit_layout.hpp"
#include "optim/lowbit.hpp"
#include "rule_training_support.hpp"
#include "sharding_test_support.hpp"
#include "shardopt/inprocess.hpp"
#include "shardopt/sharded_optimizer.hpp"

using namespace shardopt;
using shardopt::testing::assertion_mutex;
using shardopt::testing::expect_error;
using shardopt::testing::Gradients;
using shardopt::testing::initial_values;
using shardopt::testing::lowbit_element_count;
using shardopt::testing::lowbit_layout;
using shardopt::testing::lowbit_rule;
using shardopt::testing::same_bits;
using shardopt::testing::train_rank0;
using shardopt::testing::TrainRun;
using shardopt::testing::with;

namespace {

// The parameters after `steps` steps of `strategy` at `ranks` ranks (rank 0's copy), each rank
// its own gradients.
std::vector<float> train(const OptimizerOptions &optimizer, Strategy strategy, int ranks, int threads, int steps = 4) {
    TrainRun run{lowbit_layout, optimizer, with(strategy), ranks};
    run.sharding.update_threads = threads;
    run.last = steps;
    return train_rank0(run);
}

} // namespace

BOOST_AUTO_TEST_SUITE(lowbit_engine)

// Every strategy at 1, 2, 3 and 5 ranks, and the update spread over threads, equals DDP on one
// rank bit for bit (the gradients differ per rank: the average is what every layout steps on).
BOOST_AUTO_TEST_CASE(every_strategy_and_world_size_trains_the_same_bits) {
    for (StatePrecision precision : {StatePrecision::bits8, StatePrecision::bits4})
        for (OptimizerKind kind : {OptimizerKind::adam, OptimizerKind::adamw, OptimizerKind::sgd}) {
            const OptimizerOptions o = lowbit_rule(kind, precision);
            const std::string name = std::string(optimizer_kind_name(kind)) + " " + state_precision_name(precision);
            for (int ranks : {1, 2, 3, 5}) {
                const std::vector<float> reference = train(o, Strategy::ddp, ranks, 1);
                BOOST_TEST(!same_bits(reference, initial_values(lowbit_element_count())), name << ": it trained");
                for (Strategy s : {Strategy::zero1, Strategy::zero2, Strategy::fsdp})
                    BOOST_TEST(same_bits(train(o, s, ranks, 1), reference),
                               name << " x" << ranks << ": " << strategy_name(s) << " differs from ddp");
                BOOST_TEST(same_bits(train(o, Strategy::zero2, ranks, 3), reference),
                           name << " x" << ranks << ": zero2 on 3 update threads differs");
            }
        }
}

// Low-bit state is not full state: the same run with full precision ends elsewhere, but close.
BOOST_AUTO_TEST_CASE(low_bit_is_close_to_full_precision) {
    const std::vector<float> full = train(lowbit_rule(OptimizerKind::adam, StatePrecision::full), Strategy::zero2, 2, 1, 8);
    for (StatePrecision precision : {StatePrecision::bits8, StatePrecision::bits4}) {
        const std::vector<float> low = train(lowbit_rule(OptimizerKind::adam, precision), Strategy::zero2, 2, 1, 8);
        BOOST_TEST(!same_bits(low, full), state_precision_name(precision));
        double worst = 0.0;
        for (std::size_t i = 0; i < full.size(); ++i) worst = std::max(worst, double(std::fabs(low[i] - full[i])));
        const double bound = precision == StatePrecision::bits8 ? 0.01 : 0.05;
        BOOST_TEST(worst < bound, state_precision_name(precision) << ": parameters moved " << worst << " apart");
    }
}

// Bytes per rank: codes (one or half a byte per element) and a float scale per block for the
// quantized tensors, full state for the small one.
BOOST_AUTO_TEST_CASE(state_bytes_follow_the_format) {
    const std::vector<std::size_t> quantized = {5000, 9017, 4096};
    for (StatePrecision precision : {StatePrecision::bits8, StatePrecision::bits4}) {
        const std::size_t block = lowbit::block_elements(precision);
        std::size_t expected = 2 * 300 * sizeof(float); // Adam's two moments of the small tensor
        std::size_t full = 2 * 300 * sizeof(float);
        for (std::size_t n : quantized) {
            const std::size_t codes = precision == StatePrecision::bits8 ? n : (n + 1) / 2;
            expected += 2 * (codes + (n + block - 1) / block * sizeof(float));
            full += 2 * n * sizeof(float);
        }
        std::mutex &mutex = assertion_mutex();
        run_inprocess(1, [&](Communicator &comm) {
            auto opt = ShardedOptimizer::create(comm.shared_from_this(), lowbit_layout(),
                                                lowbit_rule(OptimizerKind::adam, precision), with(Strategy::ddp));
            const MemoryStats m = opt->memory_stats();
            std::lock_guard<std::mutex> lock(mutex);
            BOOST_TEST(m.optimizer_state_bytes == expected, state_precision_name(precision));
            const double ratio = double(m.optimizer_state_bytes) / double(full);
            BOOST_TEST(ratio < (precision == StatePrecision::bits8 ? 0.27 : 0.15), "ratio " << ratio);
        });
        // Sharded, the ranks' bytes add up to about the same (a block cut by a shard boundary is
        // held by both ranks: one scale more each).
        std::size_t total = 0;
        run_inprocess(3, [&](Communicator &comm) {
            auto opt = ShardedOptimizer::create(comm.shared_from_this(), lowbit_layout(),
                                                lowbit_rule(OptimizerKind::adam, precision), with(Strategy::zero2));
            const std::size_t mine = opt->memory_stats().optimizer_state_bytes;
            std::lock_guard<std::mutex> lock(mutex);
            total += mine;
        });
        BOOST_TEST(total >= expected);
        BOOST_TEST(total <= expected + 2 * 2 * 8 * (block + sizeof(float)), "3 ranks hold " << total);
    }
}

// The state crosses checkpoints as its values and comes back as the same codes and scales, also
// where shard boundaries split blocks (each split block's scale is the maximum over every rank's
// part): a ZeRO-2 optimizer on 4 ranks saved after 3 steps, loaded at 3 and at 7 ranks (and into
// DDP on 1), trains on exactly as the original does.
BOOST_AUTO_TEST_CASE(checkpoints_reshard_bit_for_bit) {
    // Every rank the same gradients, so any world size steps on the same average.
    constexpr Gradients same = Gradients::same_on_every_rank;
    for (StatePrecision precision : {StatePrecision::bits8, StatePrecision::bits4}) {
        const OptimizerOptions o = lowbit_rule(OptimizerKind::adam, precision);
        std::vector<unsigned char> bytes;
        TrainRun original{lowbit_layout, o, with(Strategy::zero2), 4, same, 1, 3};
        original.save = &bytes;
        train_rank0(original);
        // The reference: the same 6 steps without a checkpoint, on one rank.
        const std::vector<float> expected = train_rank0({lowbit_layout, o, with(Strategy::ddp), 1, same, 1, 6});
        for (const auto &run : std::vector<std::pair<int, Strategy>>{
                 {3, Strategy::zero2}, {7, Strategy::fsdp}, {1, Strategy::ddp}, {2, Strategy::zero1}}) {
            const std::vector<float> got = train_rank0({lowbit_layout, o, with(run.second), run.first, same, 4, 6, &bytes});
            BOOST_TEST(same_bits(got, expected), state_precision_name(precision) << ": resumed at " << run.first
                                                                                 << " ranks (" << strategy_name(run.second)
                                                                                 << ") differs");
        }
    }
}

// Where low-bit state cannot run yet it is refused, naming it: async SGD keeps full state.
BOOST_AUTO_TEST_CASE(refused_where_it_cannot_run) {
    run_inprocess(2, [&](Communicator &comm) {
        expect_error(ErrorCode::unsupported, "state_precision 8bit", [&] {
            ShardedOptimizer::create(comm.shared_from_this(), lowbit_layout(), lowbit_rule(OptimizerKind::adam, StatePrecision::bits8),
                                     with(Strategy::async_sgd));
        });
    });
}

BOOST_AUTO_TEST_SUITE_END()

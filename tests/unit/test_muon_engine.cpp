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

#include "sharding_test_support.hpp"
#include "shardopt/inprocess.hpp"
#include "shardopt/sharded_optimizer.hpp"

using namespace shardopt;
using shardopt::testing::assertion_mutex;
using shardopt::testing::gradient;
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

// `rank`: whose gradients (-1: rank 0's on every rank, rounded so any world size averages exactly).
void step(ShardedOptimizer &opt, int rank, int step_number) {
    std::vector<float> packed(elements());
    opt.get_parameters(packed.data());
    const ParameterSet &layout = opt.layout();
    opt.zero_grad();
    for (int b = layout.bucket_count() - 1; b >= 0; --b) {
        opt.gather(b);
        const auto &bl = layout.bucket(b);
        std::size_t at = 0;
        for (int t = 0; t < bl.first_tensor; ++t) at += layout.tensor(t).count;
        for (int t = bl.first_tensor; t < bl.first_tensor + bl.tensor_count; ++t) {
            auto *g = static_cast<float *>(opt.grad(t));
            for (std::size_t i = 0; i < layout.tensor(t).count; ++i) {
                g[i] = gradient(packed[at + i], at + i, rank < 0 ? 0 : rank, step_number);
                if (rank < 0) g[i] = std::ldexp(std::round(std::ldexp(g[i], 12)), -12);
            }
            at += layout.tensor(t).count;
        }
        opt.grad_ready(b);
        opt.release(b);
    }
    opt.step();
}

std::vector<float> train(Strategy strategy, int ranks, int threads, bool same_gradients, int first, int last,
                         const std::vector<unsigned char> *load = nullptr, std::vector<unsigned char> *save = nullptr) {
    std::vector<float> result(elements());
    std::mutex &mutex = assertion_mutex();
    run_inprocess(ranks, [&](Communicator &comm) {
        ShardingOptions s = with(strategy);
        s.update_threads = threads;
        const std::vector<float> init = initial_values(elements());
        auto opt = ShardedOptimizer::create(comm.shared_from_this(), muon_layout(), muon(), s, init.data());
        if (load) opt->deserialize(load->data(), load->size());
        for (int k = first; k <= last; ++k) step(*opt, same_gradients ? -1 : comm.rank(), k);
        std::vector<float> packed(elements());
        opt->get_parameters(packed.data());
        std::vector<unsigned char> bytes;
        if (save) bytes = opt->serialize();
        if (comm.rank() == 0) {
            std::lock_guard<std::mutex> lock(mutex);
            result = packed;
            if (save) *save = std::move(bytes);
        }
    });
    return result;
}

bool same_bits(const std::vector<float> &a, const std::vector<float> &b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
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

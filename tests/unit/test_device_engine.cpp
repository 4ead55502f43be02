// The device sharded optimizer's engine, run on the host space (src/sharding/device/): for every
// strategy, rank count and option that changes its path, training must end bit for bit where
// ShardedOptimizer ends, since both do the same arithmetic in the same order. On a GPU the same
// engine runs with the CUDA space (tests/gpu/sharded_device_main.cpp).
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>

#include "sharding/device/host_space.hpp"
#include "shardopt/cuda_sharded_optimizer.hpp"
#include "sharding_test_support.hpp"
#include "shardopt/error.hpp"
#include "shardopt/inprocess.hpp"
#include "shardopt/sharded_optimizer.hpp"

using namespace shardopt;
using shardopt::testing::expect_error;
using shardopt::testing::with;
using shardopt::cuda::ShardedDeviceOptimizer;

namespace {

// Several buckets of 1 KiB, tensors of odd sizes, one of them spanning a bucket on its own.
ParameterSet test_layout(bool tp_replicated_bias = false) {
    ParameterSet layout(DType::f32, 1024);
    layout.add("w1", 301);
    layout.add("b1", 17, tp_replicated_bias);
    layout.add("w2", 513);
    layout.add("b2", 3, tp_replicated_bias);
    layout.end_bucket();
    layout.add("w3", 64);
    return layout;
}

std::vector<float> initial_values(std::size_t n) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = 0.5f * std::sin(0.37f * float(i) + 0.1f);
    return v;
}

// A gradient that depends on the parameters, the rank and the step, so a wrong shard, stale
// parameters or a missed reduction all change the result.
float gradient(float w, std::size_t i, int rank, int step) {
    return std::cos(w * float(rank + 1) + 0.1f * float(step)) + 0.01f * float(i % 7) - 0.3f * w;
}

struct Config {
    std::string name;
    int ranks;
    ShardingOptions sharding;
    OptimizerOptions optimizer = OptimizerOptions::defaults(OptimizerKind::adam);
    bool tp_replicated_bias = false;
    int nonfinite_step = -1; // rank 0's gradient gets a NaN on this step
};

// Fills every bucket's gradient (backward order, FSDP units gathered around the reads) from the
// packed parameters and marks it ready; then steps. Works for both optimizer classes.
template <typename Opt>
StepResult train_step(Opt &opt, const std::vector<float> &packed, int rank, int step, const Config &config) {
    const ParameterSet &layout = opt.layout();
    opt.zero_grad();
    for (int b = layout.bucket_count() - 1; b >= 0; --b) {
        opt.gather(b);
        const auto &bl = layout.bucket(b);
        std::size_t packed_offset = 0;
        for (int t = 0; t < bl.first_tensor; ++t) packed_offset += layout.tensor(t).count;
        for (int t = bl.first_tensor; t < bl.first_tensor + bl.tensor_count; ++t) {
            const auto &tl = layout.tensor(t);
            auto *g = static_cast<float *>(opt.grad(t));
            for (std::size_t i = 0; i < tl.count; ++i)
                g[i] = gradient(packed[packed_offset + i], packed_offset + i, tl.tp_replicated ? 0 : rank, step);
            if (step == config.nonfinite_step && rank == 0 && t == 0) g[0] = std::numeric_limits<float>::quiet_NaN();
            packed_offset += tl.count;
        }
        opt.grad_ready(b);
        opt.release(b);
    }
    return opt.step();
}

void expect_same_training(const Config &config, int steps = 6) {
    std::mutex mutex;
    run_inprocess(config.ranks, [&](Communicator &comm) {
        const ParameterSet layout = test_layout(config.tp_replicated_bias);
        const std::vector<float> init = initial_values(layout.element_count());
        auto reference = ShardedOptimizer::create(comm.shared_from_this(), layout, config.optimizer, config.sharding,
                                                  init.data());
        auto engine = ShardedDeviceOptimizer::create_in(device::make_host_space(), comm.shared_from_this(), layout,
                                                        config.optimizer, config.sharding, init.data());
        const std::size_t n = reference->layout().element_count();
        std::vector<float> expected(n), got(n);
        for (int step = 0; step < steps; ++step) {
            reference->get_parameters(expected.data());
            engine->get_parameters(got.data());
            const StepResult a = train_step(*reference, expected, comm.rank(), step, config);
            const StepResult b = train_step(*engine, got, comm.rank(), step, config);
            std::lock_guard<std::mutex> lock(mutex);
            BOOST_TEST(a.applied == b.applied, config.name << " step " << step);
            BOOST_TEST(a.skipped_nonfinite == b.skipped_nonfinite, config.name << " step " << step);
            BOOST_TEST(a.accumulating == b.accumulating, config.name << " step " << step);
            if (std::isfinite(a.grad_norm)) BOOST_TEST(a.grad_norm == b.grad_norm, config.name << " step " << step);
        }
        reference->get_parameters(expected.data());
        engine->get_parameters(got.data());
        std::lock_guard<std::mutex> lock(mutex);
        BOOST_TEST(engine->step_count() == reference->step_count(), config.name);
        BOOST_TEST(std::memcmp(expected.data(), got.data(), n * sizeof(float)) == 0,
                   config.name << " rank " << comm.rank() << ": parameters differ from ShardedOptimizer's");
        BOOST_TEST(expected != initial_values(n), config.name << ": training changed nothing");
    });
}

} // namespace

BOOST_AUTO_TEST_SUITE(device_engine)

BOOST_AUTO_TEST_CASE(every_strategy_matches_sharded_optimizer) {
    for (int ranks : {1, 2, 3, 4})
        for (Strategy s : {Strategy::ddp, Strategy::zero1, Strategy::zero2, Strategy::fsdp, Strategy::local_sgd}) {
            Config c{std::string(strategy_name(s)) + " x" + std::to_string(ranks), ranks, with(s)};
            c.sharding.local_sgd_period = 2;
            expect_same_training(c);
        }
}

BOOST_AUTO_TEST_CASE(options_that_change_the_path) {
    Config accumulate{"zero2 accumulation 3", 2, with(Strategy::zero2)};
    accumulate.sharding.gradient_accumulation_steps = 3;
    expect_same_training(accumulate, 9);

    Config clip{"fsdp clipped", 4, with(Strategy::fsdp)};
    clip.sharding.max_grad_norm = 0.5;
    clip.sharding.fsdp_prefetch = false;
    expect_same_training(clip);

    Config nonfinite{"zero1 NaN on step 2", 3, with(Strategy::zero1)};
    nonfinite.nonfinite_step = 2;
    expect_same_training(nonfinite);

    Config overlap{"zero2 overlapped gather, 2 staging buffers", 4, with(Strategy::zero2)};
    overlap.sharding.overlap_param_gather = true;
    overlap.sharding.staging_buffers = 2;
    expect_same_training(overlap);

    Config sgd{"ddp sgd nesterov", 2, with(Strategy::ddp), OptimizerOptions::defaults(OptimizerKind::sgd)};
    sgd.optimizer.momentum = 0.9;
    sgd.optimizer.nesterov = true;
    expect_same_training(sgd);

    Config adagrad{"zero2 adagrad", 2, with(Strategy::zero2), OptimizerOptions::defaults(OptimizerKind::adagrad)};
    adagrad.optimizer.initial_accumulator_value = 0.1;
    expect_same_training(adagrad);

    Config lamb{"ddp lamb", 2, with(Strategy::ddp), OptimizerOptions::defaults(OptimizerKind::lamb)};
    expect_same_training(lamb);
}

BOOST_AUTO_TEST_CASE(hybrid_grids) {
    Config hsdp{"hsdp 2 replicas x 2 shards", 4, with(Strategy::hybrid)};
    hsdp.sharding.hybrid_data_strategy = Strategy::fsdp;
    hsdp.sharding.hsdp_replicas = 2;
    expect_same_training(hsdp);

    Config tp{"tp 2 x dp 2 zero2", 4, with(Strategy::hybrid)};
    tp.sharding.tensor_parallel_size = 2;
    tp.sharding.hybrid_data_strategy = Strategy::zero2;
    tp.tp_replicated_bias = true;
    expect_same_training(tp);
}

BOOST_AUTO_TEST_CASE(memory_is_sharded) {
    std::mutex mutex;
    run_inprocess(4, [&](Communicator &comm) {
        for (Strategy s : {Strategy::ddp, Strategy::zero2, Strategy::fsdp}) {
            auto opt = ShardedDeviceOptimizer::create_in(device::make_host_space(), comm.shared_from_this(),
                                                         test_layout(), OptimizerOptions::defaults(OptimizerKind::adam),
                                                         with(s));
            const MemoryStats m = opt->memory_stats();
            const std::size_t full = opt->layout().padded_count() * 4, shard = opt->layout().shard_count() * 4;
            std::lock_guard<std::mutex> lock(mutex);
            BOOST_TEST(m.params_bytes == (s == Strategy::fsdp ? shard : full), strategy_name(s));
            BOOST_TEST(m.grads_bytes == (s == Strategy::ddp ? full : shard), strategy_name(s));
            // Adam: two state slots over what this rank updates.
            const std::size_t owned = s == Strategy::ddp ? opt->layout().element_count() * 4 : 0;
            if (s == Strategy::ddp) BOOST_TEST(m.optimizer_state_bytes == 2 * owned);
            else BOOST_TEST(m.optimizer_state_bytes <= 2 * shard, strategy_name(s));
        }
    });
}

BOOST_AUTO_TEST_CASE(refusals) {
    run_inprocess(2, [&](Communicator &comm) {
        ParameterSet f64(DType::f64);
        f64.add("x", 10);
        expect_error(ErrorCode::invalid_argument, "f32", [&] {
            ShardedDeviceOptimizer::create_in(device::make_host_space(), comm.shared_from_this(), f64,
                                              OptimizerOptions::defaults(OptimizerKind::adam), with(Strategy::ddp));
        });
        expect_error(ErrorCode::unsupported, "LAMB", [&] {
            ShardedDeviceOptimizer::create_in(device::make_host_space(), comm.shared_from_this(), test_layout(),
                                              OptimizerOptions::defaults(OptimizerKind::lamb), with(Strategy::zero2));
        });
        auto fsdp = ShardedDeviceOptimizer::create_in(device::make_host_space(), comm.shared_from_this(),
                                                      test_layout(), OptimizerOptions::defaults(OptimizerKind::adam),
                                                      with(Strategy::fsdp));
        expect_error(ErrorCode::invalid_state, "sharded", [&] { fsdp->parameters(); });
        expect_error(ErrorCode::invalid_state, "not gathered", [&] { fsdp->tensor_parameters(0); });
        expect_error(ErrorCode::invalid_argument, "null", [&] { fsdp->get_parameters(nullptr); });
        fsdp->zero_grad();
        fsdp->grad_ready(0);
        expect_error(ErrorCode::invalid_state, "twice", [&] { fsdp->grad_ready(0); });
    });
    // create() puts the engine on the communicator's GPU: a host communicator has none.
    run_inprocess(1, [&](Communicator &comm) {
#ifdef SHARDOPT_HAVE_CUDA
        const ErrorCode expected = ErrorCode::invalid_argument;
        const std::string needle = "has no device";
#else
        const ErrorCode expected = ErrorCode::unsupported;
        const std::string needle = "CUDA";
#endif
        expect_error(expected, needle, [&] {
            ShardedDeviceOptimizer::create(comm.shared_from_this(), test_layout(),
                                           OptimizerOptions::defaults(OptimizerKind::adam), with(Strategy::ddp));
        });
    });
}

BOOST_AUTO_TEST_SUITE_END()

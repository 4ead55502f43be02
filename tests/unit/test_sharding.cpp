// ShardedOptimizer behaviour beyond equivalence: memory held per strategy, non-finite skips,
// state synchronization, early-stop votes, LocalSGD, optimize(), and misuse errors.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <mutex>

#include "mlp.hpp"
#include "sharding_test_support.hpp"
#include "shardopt/error.hpp"
#include "shardopt/inprocess.hpp"
#include "shardopt/sharded_optimizer.hpp"

using namespace shardopt;
using shardopt::testing::expect_error;
using shardopt::testing::with;

namespace {

ParameterSet big_layout(std::size_t bucket_bytes) {
    ParameterSet layout(DType::f32, bucket_bytes);
    layout.add("a", 40000);
    layout.add("b", 25001);
    layout.add("c", 7);
    layout.add("d", 60000);
    return layout;
}

// One step with a constant gradient, every bucket handed over in backward order.
void one_step(ShardedOptimizer &opt, float value) {
    opt.zero_grad();
    for (int b = opt.layout().bucket_count() - 1; b >= 0; --b) {
        auto *g = static_cast<float *>(opt.bucket_grad(b));
        for (std::size_t i = 0; i < opt.layout().bucket(b).count; ++i) g[i] = value;
        opt.grad_ready(b);
    }
    opt.step();
}

} // namespace

BOOST_AUTO_TEST_SUITE(sharding)

BOOST_AUTO_TEST_CASE(memory_per_strategy_f32_adam) {
    const int N = 4;
    const std::size_t bucket_bytes = 128 << 10;
    for (Strategy s : {Strategy::ddp, Strategy::zero1, Strategy::zero2, Strategy::fsdp}) {
        std::mutex m;
        MemoryStats stats;
        std::size_t P = 0, bucket = 0;
        run_inprocess(N, [&](Communicator &comm) {
            auto o = with(s);
            o.fsdp_prefetch = false;
            auto opt = ShardedOptimizer::create(comm.shared_from_this(), big_layout(bucket_bytes),
                                                OptimizerOptions::defaults(OptimizerKind::adam), o);
            for (int step = 0; step < 2; ++step) {
                for (int b = 0; b < opt->layout().bucket_count(); ++b) {
                    opt->gather(b);
                    opt->release(b);
                }
                one_step(*opt, 0.01f);
            }
            if (comm.rank() == 1) {
                std::lock_guard<std::mutex> lock(m);
                stats = opt->memory_stats();
                P = opt->layout().padded_count();
                bucket = opt->layout().max_bucket_padded() * 4;
            }
        });
        BOOST_TEST_CONTEXT(strategy_name(s)) {
            const std::size_t held = stats.params_bytes + stats.grads_bytes + stats.optimizer_state_bytes;
            switch (s) {
            case Strategy::ddp: BOOST_TEST(held == 16 * P); break;
            case Strategy::zero1: BOOST_TEST(held == 8 * P + 8 * P / N); break;
            case Strategy::zero2: BOOST_TEST(held == 4 * P + 12 * P / N); break;
            case Strategy::fsdp: BOOST_TEST(held == 16 * P / N); break;
            default: break;
            }
            // At most one bucket (gradient staging) or one gathered unit at once, and FSDP both.
            const std::size_t allowed = s == Strategy::fsdp ? 2 * bucket : (s == Strategy::zero2 ? bucket : 0);
            BOOST_TEST(stats.peak_buffer_bytes <= allowed);
            BOOST_TEST(stats.buffer_bytes <= allowed);
        }
    }
}

BOOST_AUTO_TEST_CASE(nonfinite_gradient_skips_on_every_rank) {
    run_inprocess(3, [](Communicator &comm) {
        auto opt = ShardedOptimizer::create(comm.shared_from_this(), big_layout(64 << 10),
                                            OptimizerOptions::defaults(OptimizerKind::adam), with(Strategy::zero2));
        one_step(*opt, 0.5f);
        std::vector<float> before(opt->layout().element_count()), after(before.size());
        opt->get_parameters(before.data());
        opt->zero_grad();
        for (int b = 0; b < opt->layout().bucket_count(); ++b) {
            auto *g = static_cast<float *>(opt->bucket_grad(b));
            if (comm.rank() == 2 && b == 0) g[3] = NAN; // only one rank sees it
            opt->grad_ready(b);
        }
        const StepResult r = opt->step();
        opt->get_parameters(after.data());
        if (!r.skipped_nonfinite || r.applied) throw std::runtime_error("step with NaN was not skipped");
        if (opt->step_count() != 1) throw std::runtime_error("skipped step advanced the step count");
        if (std::memcmp(before.data(), after.data(), before.size() * 4) != 0)
            throw std::runtime_error("skipped step changed parameters");
    });
}

BOOST_AUTO_TEST_CASE(synchronize_restores_replicated_state) {
    run_inprocess(3, [](Communicator &comm) {
        auto opt = ShardedOptimizer::create(comm.shared_from_this(), big_layout(64 << 10),
                                            OptimizerOptions::defaults(OptimizerKind::adam), with(Strategy::ddp));
        one_step(*opt, 0.25f);
        auto *p = static_cast<float *>(opt->parameters());
        if (comm.rank() == 1) p[5] += 1.0f; // drift on one rank
        opt->synchronize_optimizer_state();
        float mine = p[5], lo = 0, hi = 0;
        comm.allreduce(&mine, &lo, 1, DType::f32, ReduceOp::min);
        comm.allreduce(&mine, &hi, 1, DType::f32, ReduceOp::max);
        if (lo != hi) throw std::runtime_error("replicated parameters still differ after synchronize");
    });
}

BOOST_AUTO_TEST_CASE(synchronize_detects_inconsistent_shards) {
    run_inprocess(2, [](Communicator &comm) {
        auto adam = OptimizerOptions::defaults(OptimizerKind::adam);
        if (comm.rank() == 1) adam.lr *= 2; // a misconfigured rank: refused when created
        try {
            auto opt = ShardedOptimizer::create(comm.shared_from_this(), big_layout(64 << 10), adam, with(Strategy::fsdp));
            opt->synchronize_optimizer_state();
        } catch (const Error &e) {
            if (e.code() == ErrorCode::mismatch && std::string(e.what()).find("learning rate") != std::string::npos)
                return;
            throw;
        }
        throw std::runtime_error("inconsistent learning rate not detected");
    });
}

BOOST_AUTO_TEST_CASE(early_stop_is_a_vote) {
    run_inprocess(4, [](Communicator &comm) {
        auto opt = ShardedOptimizer::create(comm.shared_from_this(), big_layout(64 << 10),
                                            OptimizerOptions::defaults(OptimizerKind::sgd), with(Strategy::zero1));
        if (opt->should_early_stop(false)) throw std::runtime_error("nobody voted, yet stop");
        if (!opt->should_early_stop(comm.rank() == 2)) throw std::runtime_error("rank 2 voted, yet no stop");
    });
}

// LocalSGD with period 1 over plain SGD is DDP: the mean of local SGD steps is one SGD step
// on the mean gradient.
BOOST_AUTO_TEST_CASE(local_sgd_period_one_equals_ddp) {
    std::vector<std::vector<float>> finals(2);
    int which = 0;
    for (Strategy s : {Strategy::ddp, Strategy::local_sgd}) {
        std::mutex m;
        run_inprocess(4, [&](Communicator &comm) {
            auto o = with(s);
            o.local_sgd_period = 1;
            auto sgd = OptimizerOptions::defaults(OptimizerKind::sgd);
            sgd.lr = 0.5; // exact in binary, so both orders of operations round alike
            auto opt = ShardedOptimizer::create(comm.shared_from_this(), big_layout(64 << 10), sgd, o);
            for (int step = 0; step < 3; ++step) one_step(*opt, 0.125f * float(comm.rank() + 1) * float(step + 1));
            std::vector<float> p(opt->layout().element_count());
            opt->get_parameters(p.data());
            std::lock_guard<std::mutex> lock(m);
            if (comm.rank() == 0) finals[which] = p;
        });
        ++which;
    }
    BOOST_TEST(finals[0] == finals[1], boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(local_sgd_averages_every_period) {
    run_inprocess(3, [](Communicator &comm) {
        auto o = with(Strategy::local_sgd);
        o.local_sgd_period = 3;
        auto opt = ShardedOptimizer::create(comm.shared_from_this(), big_layout(64 << 10),
                                            OptimizerOptions::defaults(OptimizerKind::adam), o);
        auto spread = [&] {
            float mine = static_cast<float *>(opt->parameters())[0], lo = 0, hi = 0;
            comm.allreduce(&mine, &lo, 1, DType::f32, ReduceOp::min);
            comm.allreduce(&mine, &hi, 1, DType::f32, ReduceOp::max);
            return hi - lo;
        };
        for (int step = 1; step <= 4; ++step) {
            one_step(*opt, 0.1f * float(comm.rank() + 1) * (comm.rank() == 1 ? -1.0f : 1.0f));
            const bool averaged = step % 3 == 0;
            if (averaged != (spread() == 0.0f))
                throw std::runtime_error("step " + std::to_string(step) + ": replicas should " +
                                         (averaged ? "agree" : "differ"));
        }
    });
}

// LocalSGD steps on local gradients: the reported (and clipped) norm is the local one.
BOOST_AUTO_TEST_CASE(local_sgd_norm_is_local) {
    run_inprocess(4, [](Communicator &comm) {
        auto o = with(Strategy::local_sgd);
        o.max_grad_norm = 1.0;
        auto opt = ShardedOptimizer::create(comm.shared_from_this(), big_layout(64 << 10),
                                            OptimizerOptions::defaults(OptimizerKind::sgd), o);
        const float g = 0.5f * float(comm.rank() + 1);
        opt->zero_grad();
        for (int b = 0; b < opt->layout().bucket_count(); ++b) {
            auto *grad = static_cast<float *>(opt->bucket_grad(b));
            for (std::size_t i = 0; i < opt->layout().bucket(b).count; ++i) grad[i] = g;
            opt->grad_ready(b);
        }
        const double expected = double(g) * std::sqrt(double(opt->layout().element_count()));
        const double got = opt->step().grad_norm;
        if (std::abs(got - expected) > 1e-6 * expected)
            throw std::runtime_error("local norm " + std::to_string(got) + ", expected " + std::to_string(expected));
    });
}

BOOST_AUTO_TEST_CASE(optimize_trains_and_stops_early) {
    const examples::MlpShape shape;
    const auto data = examples::make_blobs(240, shape.inputs, shape.classes);
    const auto init = examples::mlp_init<double>(shape);
    auto run = [&](int world, int patience, double min_delta) {
        OptimizeResult out;
        std::mutex m;
        run_inprocess(world, [&](Communicator &comm) {
            ParameterSet layout(DType::f64);
            for (auto &[name, count] : examples::mlp_tensors(shape)) layout.add(name, count);
            auto adam = OptimizerOptions::defaults(OptimizerKind::adam);
            adam.lr = 0.01;
            auto opt = ShardedOptimizer::create(comm.shared_from_this(), layout, adam, with(Strategy::zero2), init.data());
            OptimizeOptions o;
            o.num_samples = std::int64_t(data.size());
            o.batch_size = 60;
            o.epochs = 15;
            o.patience = patience;
            o.min_delta = min_delta;
            auto result = opt->optimize(
                [&](const void *p, void *g, const std::int64_t *idx, std::size_t n) {
                    return examples::mlp_loss_grad<double>(shape, data, static_cast<const double *>(p),
                                                           static_cast<double *>(g), idx, n);
                },
                o);
            std::lock_guard<std::mutex> lock(m);
            if (comm.rank() == 0) out = result;
        });
        return out;
    };
    const auto single = run(1, 0, 0.0), sharded = run(3, 0, 0.0);
    BOOST_TEST(single.iterations == 60);
    BOOST_TEST(sharded.iterations == 60);
    BOOST_TEST(!sharded.stopped_early);
    BOOST_TEST(sharded.loss_history.size() == 15u);
    BOOST_TEST(sharded.loss_history.back() < 0.5 * sharded.loss_history.front());
    for (std::size_t e = 0; e < single.loss_history.size(); ++e)
        BOOST_TEST(std::abs(sharded.loss_history[e] - single.loss_history[e]) <= 1e-9 * single.loss_history[e]);
    const auto *a = reinterpret_cast<const double *>(sharded.best_parameters.data());
    const auto *b = reinterpret_cast<const double *>(single.best_parameters.data());
    for (std::size_t i = 0; i < init.size(); ++i) BOOST_TEST(std::abs(a[i] - b[i]) <= 1e-9);
    // An unreachable improvement threshold: stops after `patience` epochs without improvement.
    const auto stopped = run(2, 2, 1e9);
    BOOST_TEST(stopped.stopped_early);
    BOOST_TEST(stopped.loss_history.size() == 3u);
}

BOOST_AUTO_TEST_CASE(misuse_is_reported) {
    run_inprocess(2, [](Communicator &comm) {
        auto adam = OptimizerOptions::defaults(OptimizerKind::adam);
        auto fsdp = ShardedOptimizer::create(comm.shared_from_this(), big_layout(64 << 10), adam, with(Strategy::fsdp));
        expect_error(ErrorCode::invalid_state, "sharded", [&] { fsdp->parameters(); });
        expect_error(ErrorCode::invalid_state, "not gathered", [&] { fsdp->tensor_parameters(0); });
        expect_error(ErrorCode::invalid_argument, "out of range", [&] { fsdp->grad_ready(99); });
        fsdp->zero_grad();
        fsdp->bucket_grad(0);
        expect_error(ErrorCode::invalid_state, "staging", [&] { fsdp->bucket_grad(1); });
        fsdp->grad_ready(0);
        expect_error(ErrorCode::invalid_state, "twice", [&] { fsdp->grad_ready(0); });
        fsdp->step();
        auto bad = with(Strategy::hybrid);
        bad.tensor_parallel_size = 3;
        expect_error(ErrorCode::invalid_argument, "not divisible",
                     [&] { ShardedOptimizer::create(comm.shared_from_this(), big_layout(64 << 10), adam, bad); });
        expect_error(ErrorCode::invalid_argument, "null",
                     [&] { ShardedOptimizer::create(nullptr, big_layout(64 << 10), adam, with(Strategy::ddp)); });
        auto neg = adam;
        neg.lr = -1;
        expect_error(ErrorCode::invalid_argument, "lr",
                     [&] { ShardedOptimizer::create(comm.shared_from_this(), big_layout(64 << 10), neg, with(Strategy::ddp)); });
    });
}

// ShardedOptimizer checks the arguments every backend shares once, before it forwards: the step
// engine (each strategy) and asynchronous SGD refuse the same bad arguments with the same words.
BOOST_AUTO_TEST_CASE(shared_checks_are_the_same_for_every_backend) {
    run_inprocess(2, [](Communicator &comm) {
        const auto sgd = OptimizerOptions::defaults(OptimizerKind::sgd);
        const ModelFunction model = [](const void *, void *, const std::int64_t *, std::size_t) { return 0.0; };
        for (Strategy s : {Strategy::ddp, Strategy::zero2, Strategy::fsdp, Strategy::local_sgd, Strategy::async_sgd}) {
            auto opt = ShardedOptimizer::create(comm.shared_from_this(), big_layout(64 << 10), sgd, with(s));
            OptimizeOptions o;
            o.num_samples = 8;
            expect_error(ErrorCode::invalid_argument, "optimize: model function is null",
                         [&] { opt->optimize(ModelFunction(), o); });
            auto bad = o;
            bad.num_samples = 0;
            expect_error(ErrorCode::invalid_argument, "optimize: num_samples must be > 0", [&] { opt->optimize(model, bad); });
            bad = o;
            bad.first_epoch = -1;
            expect_error(ErrorCode::invalid_argument, "optimize: first_epoch must be >= 0", [&] { opt->optimize(model, bad); });
            bad = o;
            bad.start_iteration = -1; // async SGD's own loop did not check this one before
            expect_error(ErrorCode::invalid_argument, "optimize: start_iteration must be >= 0",
                         [&] { opt->optimize(model, bad); });
            bad = o;
            bad.patience = -1;
            expect_error(ErrorCode::invalid_argument, "patience", [&] { opt->optimize(model, bad); });
            expect_error(ErrorCode::invalid_argument, "get_parameters: null buffer", [&] { opt->get_parameters(nullptr); });
            expect_error(ErrorCode::invalid_argument, "set_parameters: null buffer", [&] { opt->set_parameters(nullptr); });
            expect_error(ErrorCode::invalid_argument, "lr", [&] { opt->set_learning_rate(-1.0); });
            std::lock_guard<std::mutex> lock(shardopt::testing::assertion_mutex());
            BOOST_TEST(opt->optimizer_options().lr == sgd.lr); // unchanged by the refused call
        }
    });
}

// A billion f32 parameters under DDP on 4 ranks of one host (64 GB) is refused before anything
// is allocated, with the estimate in the message.
BOOST_AUTO_TEST_CASE(model_too_big_is_refused_up_front) {
    run_inprocess(4, [](Communicator &comm) {
        ParameterSet layout(DType::f32);
        for (int i = 0; i < 10; ++i) layout.add("layer" + std::to_string(i), 100'000'000);
        expect_error(ErrorCode::out_of_memory, "needs 16.00 GB per rank", [&] {
            ShardedOptimizer::create(comm.shared_from_this(), layout, OptimizerOptions::defaults(OptimizerKind::adam),
                                     with(Strategy::ddp));
        });
    });
}

BOOST_AUTO_TEST_CASE(parameter_set_layout) {
    ParameterSet layout(DType::f32, 100 * 4);
    layout.add("w", 70);
    layout.add("x", 50); // would overflow the 100-element bucket: starts a new one
    layout.add("y", 3);
    layout.end_bucket();
    layout.add("z", 1);
    expect_error(ErrorCode::invalid_argument, "twice", [&] { layout.add("z", 4); });
    expect_error(ErrorCode::invalid_argument, "zero", [&] { layout.add("e", 0); });
    layout.plan(3);
    BOOST_TEST(layout.bucket_count() == 3);
    BOOST_TEST(layout.bucket(0).count == 70u);
    BOOST_TEST(layout.bucket(0).padded == 72u);
    BOOST_TEST(layout.bucket(1).count == 53u);
    BOOST_TEST(layout.bucket(1).offset == 72u);
    BOOST_TEST(layout.bucket(1).padded == 54u);
    BOOST_TEST(layout.bucket(2).padded == 3u);
    BOOST_TEST(layout.tensor(2).offset == 72u + 50u);
    BOOST_TEST(layout.shard_count() == (72u + 54u + 3u) / 3u);
    BOOST_TEST(layout.bucket(2).shard_offset == 24u + 18u);
    BOOST_TEST(layout.element_count() == 124u);
    expect_error(ErrorCode::invalid_state, "planned", [&] { layout.add("late", 1); });
    ParameterSet other = layout;
    BOOST_TEST(other.fingerprint() == layout.fingerprint());
}

BOOST_AUTO_TEST_SUITE_END()

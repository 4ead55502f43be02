// Asynchronous SGD on in-process ranks: staleness 0 is DDP bit for bit; with a rank slowed down,
// the staleness bound holds, the others run ahead and training still converges; misuse and
// failures are errors on every rank, never hangs.
#define BOOST_TEST_MODULE shardopt async sgd
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <functional>
#include <limits>
#include <thread>
#include <chrono>
#include <cstring>
#include <string>

#include "async_training.hpp"
#include "mlp.hpp"
#include "shardopt/error.hpp"
#include "shardopt/inprocess.hpp"

using namespace shardopt;
using namespace shardopt::testing;
namespace bdata = boost::unit_test::data;

namespace shardopt { // data test cases print their parameters
inline std::ostream &operator<<(std::ostream &out, OptimizerKind k) { return out << optimizer_kind_name(k); }
inline std::ostream &operator<<(std::ostream &out, DType d) { return out << dtype_name(d); }
inline std::ostream &operator<<(std::ostream &out, ErrorCode c) { return out << error_code_name(c); }
} // namespace shardopt

namespace {

AsyncTraining setup_of(Strategy strategy, int staleness, OptimizerKind kind, DType dtype) {
    AsyncTraining s;
    s.strategy = strategy;
    s.staleness = staleness;
    s.optimizer = kind;
    s.lr = kind == OptimizerKind::sgd ? 0.1 : 3e-3;
    s.dtype = dtype;
    return s;
}

} // namespace

// Same batches, same sums in rank order, same division, same update: the same bits, on every
// rank, for each optimizer and dtype, over several shuffled epochs; the loss history too.
BOOST_DATA_TEST_CASE(staleness_0_is_ddp_bit_for_bit,
                     bdata::make({OptimizerKind::sgd, OptimizerKind::adam}) * bdata::make({DType::f32, DType::f64}) *
                         bdata::make({3, 4}),
                     kind, dtype, ranks) {
    const auto ddp = train_mlp_inprocess(ranks, setup_of(Strategy::ddp, 0, kind, dtype));
    const auto async = train_mlp_inprocess(ranks, setup_of(Strategy::async_sgd, 0, kind, dtype));
    BOOST_TEST(ddp[0].optimize.loss_history.back() < ddp[0].optimize.loss_history.front(), "training moved");
    for (int r = 0; r < ranks; ++r) {
        BOOST_TEST(async[r].bytes == ddp[0].bytes, "rank " << r << " ends with DDP's parameters, bit for bit");
        BOOST_TEST(async[r].optimize.loss_history == ddp[0].optimize.loss_history, "rank " << r << "'s loss history");
        BOOST_TEST(async[r].optimize.iterations == ddp[0].optimize.iterations);
        BOOST_TEST(async[r].stats.late_gradients == 0);
        BOOST_TEST(async[r].stats.max_staleness == 0);
        BOOST_TEST(async[r].stats.steps == ddp[0].optimize.iterations, "one step per clock");
    }
}

// A rank ten times slower than the others: every gradient is applied at most s clocks after the
// version it was computed on, and no worker runs more than s clocks ahead of its parameters, as
// the keeper counted and as every worker saw it; the slow rank's gradients come late or it skips
// clocks, and every rank still ends with the same parameters.
BOOST_DATA_TEST_CASE(staleness_bound_holds_with_a_straggler, bdata::make({1, 2, 4}), s) {
    AsyncTraining t = setup_of(Strategy::async_sgd, s, OptimizerKind::adam, DType::f32);
    t.epochs = 2;
    t.slow_rank = 3;
    t.slow_factor = 10.0;
    t.slow_min_ms = 2.0;
    const auto r = train_mlp_inprocess(4, t);
    const std::int64_t clocks = r[0].optimize.iterations;
    BOOST_TEST(clocks == t.epochs * (t.samples / t.batch));
    for (int k = 0; k < 4; ++k) {
        BOOST_TEST(r[k].stats.max_staleness <= s, "rank " << k);
        BOOST_TEST(r[k].stats.max_lead <= s, "rank " << k);
        BOOST_TEST(r[k].stats.max_own_lead <= s, "rank " << k);
        BOOST_TEST(r[k].stats.updates == clocks);
        BOOST_TEST(r[k].bytes == r[0].bytes, "rank " << k << " holds rank 0's parameters");
    }
    BOOST_TEST(r[0].stats.max_staleness == s, "the bound was reached: the straggler was s clocks stale");
    BOOST_TEST(r[0].stats.late_gradients + r[0].stats.skipped_clocks > 0);
    BOOST_TEST(r[3].stats.steps < r[0].stats.steps, "the straggler made fewer steps");
    BOOST_TEST(r[0].optimize.loss_history.back() < r[0].optimize.loss_history.front());
}

// The demo's setting with one rank three times slower (device work simulated by a sleep, so the
// CPU is no bottleneck): at staleness 4 the others compute (nearly) every clock while the slow
// one skips most, and the final loss is within 5% of synchronous training's.
BOOST_AUTO_TEST_CASE(converges_within_5_percent_with_a_slowed_rank) {
    AsyncTraining t = setup_of(Strategy::ddp, 0, OptimizerKind::adam, DType::f32);
    t.samples = 2048;
    t.batch = 128;
    t.epochs = 6;
    t.compute_ms = 2.0;
    t.slow_rank = 3;
    const auto ddp = train_mlp_inprocess(4, t);
    t.strategy = Strategy::async_sgd;
    t.staleness = 4;
    const auto async = train_mlp_inprocess(4, t);
    const std::int64_t clocks = ddp[0].optimize.iterations;
    BOOST_TEST_MESSAGE("final loss: ddp " << ddp[0].final_loss << ", async " << async[0].final_loss
                                          << "; steps of ranks 0..3: " << async[0].stats.steps << " "
                                          << async[1].stats.steps << " " << async[2].stats.steps << " "
                                          << async[3].stats.steps << " of " << clocks << " clocks");
    BOOST_TEST(async[0].final_loss <= 1.05 * ddp[0].final_loss);
    BOOST_TEST(async[0].final_loss < 0.5 * ddp[0].optimize.loss_history.front(), "it trained");
    for (int k = 0; k < 3; ++k) BOOST_TEST(async[k].stats.steps >= clocks * 9 / 10, "rank " << k << " kept its pace");
    BOOST_TEST(async[3].stats.steps <= clocks * 6 / 10, "the slow rank skipped clocks");
    BOOST_TEST(async[0].stats.max_staleness <= 4);
}

// Checkpoints are the other strategies': async SGD's loads into DDP at another world size and
// back, with the same parameters and step count, and training goes on from it.
BOOST_AUTO_TEST_CASE(checkpoints_move_between_async_sgd_and_ddp) {
    std::vector<unsigned char> bytes;
    std::vector<double> trained;
    std::int64_t steps = 0;
    const examples::MlpShape shape{16, 64, 4};
    auto layout_of = [&] {
        ParameterSet layout(DType::f64);
        int k = 0;
        for (auto &[name, count] : examples::mlp_tensors(shape)) {
            layout.add(name, count);
            if (++k == 2) layout.end_bucket();
        }
        return layout;
    };
    const auto data = examples::make_blobs(512, shape.inputs, shape.classes);
    const auto init = examples::mlp_init<double>(shape);
    ModelFunction model = [&](const void *p, void *g, const std::int64_t *samples, std::size_t n) {
        return examples::mlp_loss_grad<double>(shape, data, static_cast<const double *>(p), static_cast<double *>(g),
                                               samples, n);
    };
    OptimizeOptions o;
    o.num_samples = 512;
    o.batch_size = 64;
    run_inprocess(4, [&](Communicator &comm) {
        ShardingOptions async;
        async.strategy = Strategy::async_sgd;
        async.async_staleness = 2;
        auto opt = ShardedOptimizer::create(comm.shared_from_this(), layout_of(), OptimizerOptions::defaults(OptimizerKind::adam),
                                            async, init.data());
        opt->optimize(model, o);
        auto b = opt->serialize();
        std::vector<double> p(init.size());
        opt->get_parameters(p.data());
        if (comm.rank() == 0) {
            bytes = b;
            trained = p;
            steps = opt->step_count();
        }
    });
    BOOST_TEST(steps == 8);
    // Into DDP on 2 ranks, and back into async SGD, which trains on. Rank threads only record
    // (Boost.Test's assertions are not thread safe): the checks follow.
    struct Loaded {
        std::vector<double> ddp, back;
        std::int64_t ddp_steps = 0, back_steps = 0, trained_steps = 0;
    };
    std::vector<Loaded> loaded(2);
    run_inprocess(2, [&](Communicator &comm) {
        Loaded &l = loaded[std::size_t(comm.rank())];
        auto ddp = ShardedOptimizer::create(comm.shared_from_this(), layout_of(), OptimizerOptions::defaults(OptimizerKind::adam),
                                            ShardingOptions{}, init.data());
        ddp->deserialize(bytes);
        l.ddp.resize(init.size());
        ddp->get_parameters(l.ddp.data());
        l.ddp_steps = ddp->step_count();
        const auto again = ddp->serialize();
        ShardingOptions async;
        async.strategy = Strategy::async_sgd;
        auto back = ShardedOptimizer::create(comm.shared_from_this(), layout_of(), OptimizerOptions::defaults(OptimizerKind::adam),
                                             async, init.data());
        back->deserialize(again);
        l.back.resize(init.size());
        back->get_parameters(l.back.data());
        l.back_steps = back->step_count();
        back->optimize(model, o); // training goes on from the checkpoint
        l.trained_steps = back->step_count();
    });
    for (const Loaded &l : loaded) {
        BOOST_TEST(l.ddp == trained);
        BOOST_TEST(l.ddp_steps == 8);
        BOOST_TEST(l.back == trained);
        BOOST_TEST(l.back_steps == 8);
        BOOST_TEST(l.trained_steps == 16);
    }
}

namespace {

// Runs `ranks` in-process ranks of `setup`; what each rank's optimize() threw (empty: nothing).
struct Failure {
    ErrorCode code = ErrorCode::ok;
    std::string what;
    double seconds = 0;
};
std::vector<Failure> failures_of(int ranks, const AsyncTraining &setup) {
    std::vector<Failure> out(static_cast<std::size_t>(ranks));
    run_inprocess(ranks, [&](Communicator &comm) {
        const auto t0 = std::chrono::steady_clock::now();
        Failure &f = out[std::size_t(comm.rank())];
        try {
            train_mlp(comm, setup);
        } catch (const Error &e) {
            f.code = e.code();
            f.what = e.what();
        } catch (const std::exception &e) {
            f.code = ErrorCode::internal;
            f.what = e.what();
        }
        f.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    });
    return out;
}

} // namespace

// A model callback that fails on one rank fails optimize() on every rank, promptly, with its
// reason; so does a loss that is not finite (named, as DDP names it).
BOOST_DATA_TEST_CASE(a_failure_on_one_rank_stops_every_rank, bdata::make({0, 2}) * bdata::make({0, 3}), victim, s) {
    AsyncTraining t = setup_of(Strategy::async_sgd, s, OptimizerKind::adam, DType::f32);
    t.timeout = std::chrono::milliseconds(20000);
    t.after_model = [&](int rank, std::int64_t call, double loss) -> double {
        if (rank == victim && call == 5) throw Error(ErrorCode::invalid_state, "the model failed on rank " + std::to_string(rank));
        return loss;
    };
    for (const Failure &f : failures_of(4, t)) {
        BOOST_TEST(f.code == ErrorCode::invalid_state);
        BOOST_TEST(f.what.find("the model failed on rank " + std::to_string(victim)) != std::string::npos, f.what);
        BOOST_TEST(f.seconds < 10.0);
    }
    t.after_model = [&](int rank, std::int64_t call, double loss) {
        return rank == victim && call == 7 ? std::numeric_limits<double>::quiet_NaN() : loss;
    };
    for (const Failure &f : failures_of(4, t)) {
        BOOST_TEST(f.code == ErrorCode::invalid_state);
        BOOST_TEST(f.what.find("loss is NaN at epoch ") != std::string::npos, f.what);
    }
}

// A rank that stops answering (its model callback hangs past the timeout) ends in a timeout on
// the others that names it, within the timeout; nothing waits forever.
BOOST_AUTO_TEST_CASE(a_silent_rank_times_out_naming_it) {
    AsyncTraining t = setup_of(Strategy::async_sgd, 1, OptimizerKind::adam, DType::f32);
    t.timeout = std::chrono::milliseconds(600);
    t.after_model = [](int rank, std::int64_t call, double loss) {
        if (rank == 2 && call == 3) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        return loss;
    };
    const auto failures = failures_of(4, t);
    bool named = false;
    for (int k = 0; k < 4; ++k) {
        const Failure &f = failures[std::size_t(k)];
        BOOST_TEST(f.code != ErrorCode::ok, "rank " << k << " failed");
        if (k != 2) BOOST_TEST(f.seconds < 3.0, "rank " << k << " gave up within the timeout: " << f.seconds << " s");
        if (f.code == ErrorCode::timeout && f.what.find("rank 2") != std::string::npos) named = true;
    }
    BOOST_TEST(named, "a rank reports the timeout naming rank 2: " << failures[0].what);
}

// What async SGD has no use for is refused by name, the step protocol too; ranks that disagree on
// the staleness fail together.
BOOST_AUTO_TEST_CASE(bad_options_are_refused) {
    const examples::MlpShape shape{16, 64, 4};
    ParameterSet layout(DType::f32);
    for (auto &[name, count] : examples::mlp_tensors(shape)) layout.add(name, count);
    const auto adam = OptimizerOptions::defaults(OptimizerKind::adam);
    auto refused = [&](ShardingOptions o, OptimizerOptions opt, ErrorCode code, const std::string &what, int ranks = 2) {
        std::vector<std::string> messages(static_cast<std::size_t>(ranks));
        std::vector<ErrorCode> codes(static_cast<std::size_t>(ranks), ErrorCode::ok);
        run_inprocess(ranks, [&](Communicator &comm) {
            try {
                ShardingOptions mine = o;
                if (what == "disagree") mine.async_staleness = comm.rank();
                ShardedOptimizer::create(comm.shared_from_this(), layout, opt, mine);
            } catch (const Error &e) {
                codes[std::size_t(comm.rank())] = e.code();
                messages[std::size_t(comm.rank())] = e.what();
            }
        });
        for (int k = 0; k < ranks; ++k) {
            BOOST_TEST(codes[std::size_t(k)] == code, what << ": " << messages[std::size_t(k)]);
            if (what != "disagree")
                BOOST_TEST(messages[std::size_t(k)].find(what) != std::string::npos, messages[std::size_t(k)]);
        }
    };
    ShardingOptions async;
    async.strategy = Strategy::async_sgd;
    async.async_staleness = 2;
    ShardingOptions o = async;
    o.max_grad_norm = 1.0;
    refused(o, adam, ErrorCode::unsupported, "max_grad_norm");
    o = async;
    o.compression.method = GradientCompression::int8;
    refused(o, adam, ErrorCode::unsupported, "compression");
    o = async;
    o.gradient_accumulation_steps = 2;
    refused(o, adam, ErrorCode::unsupported, "gradient_accumulation_steps");
    o = async;
    o.memory = MemorySpace::cuda;
    refused(o, adam, ErrorCode::unsupported, "host memory only");
    refused(async, OptimizerOptions::defaults(OptimizerKind::lamb), ErrorCode::unsupported, "LAMB");
    o = async;
    o.async_staleness = -1;
    refused(o, adam, ErrorCode::invalid_argument, "async_staleness");
    o = ShardingOptions{};
    o.async_staleness = 1; // on DDP
    refused(o, adam, ErrorCode::invalid_argument, "async_sgd strategy only");
    refused(async, adam, ErrorCode::mismatch, "disagree", 3);

    // Rank threads only record (Boost.Test's assertions are not thread safe): the checks follow.
    struct Seen {
        std::string step_error;
        ErrorCode step_code = ErrorCode::ok;
        int refused_calls = 0;
        bool gather_is_view = false, has_async = false;
        int staleness = -1;
        MemoryStats memory;
        std::size_t padded = 0;
    };
    std::vector<Seen> seen(2);
    run_inprocess(2, [&](Communicator &comm) {
        Seen &v = seen[std::size_t(comm.rank())];
        auto opt = ShardedOptimizer::create(comm.shared_from_this(), layout, adam, async);
        const std::vector<std::function<void()>> protocol = {[&] { opt->zero_grad(); }, [&] { opt->bucket_grad(0); },
                                                             [&] { opt->grad_ready(0); }, [&] { opt->step(); }};
        for (const auto &call : protocol) {
            try {
                call();
            } catch (const Error &e) {
                ++v.refused_calls;
                v.step_code = e.code();
                v.step_error = e.what();
            }
        }
        v.gather_is_view = opt->gather(0) == opt->parameters(); // the view, as DDP's resident buffer
        v.has_async = opt->async_sgd() != nullptr;
        v.staleness = v.has_async ? opt->async_sgd()->staleness() : -1;
        v.memory = opt->memory_stats();
        v.padded = opt->layout().padded_count();
    });
    for (const Seen &v : seen) {
        BOOST_TEST(v.refused_calls == 4);
        BOOST_TEST(v.step_code == ErrorCode::unsupported);
        BOOST_TEST(v.step_error.find("optimize()") != std::string::npos, v.step_error);
        BOOST_TEST(v.gather_is_view);
        BOOST_TEST(v.has_async);
        BOOST_TEST(v.staleness == 2);
        // Memory: the view, the master shard and the state of the own shard only.
        BOOST_TEST(v.memory.params_bytes == (v.padded + v.padded / 2) * sizeof(float));
        BOOST_TEST(v.memory.optimizer_state_bytes <= 2 * (v.padded / 2) * sizeof(float));
    }
}

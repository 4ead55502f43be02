// The step engine (src/sharding/engine/) in host memory, as twins: a reference on one update
// thread with every collective waited for, and a twin whose update is spread over threads and
// whose post-update parameter allgather overlaps what follows (ZeRO). For every strategy, rank
// count and option that changes the engine's path, both must train bit for bit alike, move
// checkpoints between each other, and refuse bad input without changing. The same engine runs
// in CUDA memory in tests/gpu/sharded_device_main.cpp (on a GPU, or the CUDA stand-in).
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <stdlib.h>
#include <mutex>
#include <stdexcept>
#include <string>

#include "sharding/engine/gather_order.hpp"
#include "sharding_test_support.hpp"
#include "shardopt/error.hpp"
#include "shardopt/inprocess.hpp"
#include "shardopt/planner.hpp"
#include "shardopt/sharded_optimizer.hpp"

using namespace shardopt;
using shardopt::testing::assertion_mutex;
using shardopt::testing::expect_error;
using shardopt::testing::gradient;
using shardopt::testing::initial_values;
using shardopt::testing::with;

namespace {

// The reference's options: one update thread, every collective waited for.
ShardingOptions plain(ShardingOptions o) {
    o.update_threads = 1;
    return o;
}
// The twin's: the update on several threads, ZeRO's parameter allgather left running.
ShardingOptions threaded(ShardingOptions o) {
    o.update_threads = 3;
    o.overlap_param_gather = true;
    return o;
}

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

// Elements of test_layout() (counted once the layout is planned).
std::size_t test_elements() {
    ParameterSet layout = test_layout();
    layout.plan(1);
    return layout.element_count();
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

// The reference and its threaded, overlapped twin on one rank, made alike, trained in lockstep;
// the twin's results must equal the reference's bit for bit.
struct Twins {
    std::unique_ptr<ShardedOptimizer> reference;
    std::unique_ptr<ShardedOptimizer> engine;

    // `initial` null: the layout's zeros.
    Twins(Communicator &comm, const Config &config, const float *initial) {
        const ParameterSet layout = test_layout(config.tp_replicated_bias);
        reference =
            ShardedOptimizer::create(comm.shared_from_this(), layout, config.optimizer, plain(config.sharding), initial);
        engine = ShardedOptimizer::create(comm.shared_from_this(), layout, config.optimizer, threaded(config.sharding),
                                          initial);
    }
    std::size_t count() const { return reference->layout().element_count(); }

    // Steps [first, first + steps) of both, comparing what each step reports.
    void train(int rank, int first, int steps, const Config &config, std::mutex &mutex) {
        std::vector<float> expected(count()), got(count());
        for (int step = first; step < first + steps; ++step) {
            reference->get_parameters(expected.data());
            engine->get_parameters(got.data());
            const StepResult a = train_step(*reference, expected, rank, step, config);
            const StepResult b = train_step(*engine, got, rank, step, config);
            std::lock_guard<std::mutex> lock(mutex);
            BOOST_TEST(a.applied == b.applied, config.name << " step " << step);
            BOOST_TEST(a.skipped_nonfinite == b.skipped_nonfinite, config.name << " step " << step);
            BOOST_TEST(a.accumulating == b.accumulating, config.name << " step " << step);
            if (std::isfinite(a.grad_norm)) BOOST_TEST(a.grad_norm == b.grad_norm, config.name << " step " << step);
        }
    }

    // Same parameters and step count; returns the reference's parameters.
    std::vector<float> expect_same(int rank, const std::string &what, std::mutex &mutex) {
        std::vector<float> expected(count()), got(count());
        reference->get_parameters(expected.data());
        engine->get_parameters(got.data());
        std::lock_guard<std::mutex> lock(mutex);
        BOOST_TEST(engine->step_count() == reference->step_count(), what << " rank " << rank);
        BOOST_TEST(std::memcmp(expected.data(), got.data(), count() * sizeof(float)) == 0,
                   what << " rank " << rank << ": parameters differ from the reference's");
        return expected;
    }
};

void expect_same_training(const Config &config, int steps = 6) {
    std::mutex &mutex = assertion_mutex();
    run_inprocess(config.ranks, [&](Communicator &comm) {
        const std::vector<float> init = initial_values(test_elements());
        Twins twins(comm, config, init.data());
        twins.train(comm.rank(), 0, steps, config, mutex);
        const std::vector<float> params = twins.expect_same(comm.rank(), config.name, mutex);
        std::lock_guard<std::mutex> lock(mutex);
        BOOST_TEST(params != init, config.name << ": training changed nothing");
    });
}

// A fresh empty directory, removed with its contents at the end of the scope.
struct TempDir {
    std::string path;
    TempDir() {
        char tmpl[] = "/tmp/shardopt-devckpt-XXXXXX";
        const char *made = ::mkdtemp(tmpl);
        if (made == nullptr) throw std::runtime_error("mkdtemp failed"); // no assertion: rank threads make these
        path = made;
    }
    ~TempDir() { std::filesystem::remove_all(path); }
    std::string sub(const std::string &name) const { return path + "/" + name; }
};

enum class Transfer { sharded, consolidated, serialized };
const char *transfer_name(Transfer t) {
    return t == Transfer::sharded ? "sharded" : t == Transfer::consolidated ? "consolidated" : "serialized";
}

// A checkpoint moving between the classes: both train `steps` at (from_ranks, from) in lockstep
// and each saves; then, at (to_ranks, to), ShardedOptimizer loads the engine's checkpoint and
// the engine loads ShardedOptimizer's. Both must resume exactly where the other left off and
// keep training bit for bit alike.
struct Move {
    std::string name;
    int from_ranks;
    ShardingOptions from;
    int to_ranks;
    ShardingOptions to;
    Transfer how;
    OptimizerOptions optimizer = OptimizerOptions::defaults(OptimizerKind::adam);
};

void expect_cross_resume(const Move &m, int steps = 4) {
    const std::string name = m.name + " (" + transfer_name(m.how) + ")";
    TempDir dir;
    const std::string engine_dir = dir.sub("engine"), reference_dir = dir.sub("reference");
    std::vector<unsigned char> engine_bytes, reference_bytes; // rank 0's serialized bytes
    std::mutex &mutex = assertion_mutex();
    Config before{name + " before", m.from_ranks, m.from, m.optimizer};
    std::vector<float> saved; // rank 0's parameters when saved
    run_inprocess(m.from_ranks, [&](Communicator &comm) {
        const std::vector<float> init = initial_values(test_elements());
        Twins twins(comm, before, init.data());
        twins.train(comm.rank(), 0, steps, before, mutex);
        const std::vector<float> params = twins.expect_same(comm.rank(), before.name, mutex);
        if (m.how == Transfer::serialized) {
            std::vector<unsigned char> a = twins.engine->serialize(), b = twins.reference->serialize();
            std::lock_guard<std::mutex> lock(mutex);
            if (comm.rank() == 0) {
                engine_bytes = std::move(a);
                reference_bytes = std::move(b);
            }
        } else {
            const CheckpointForm form = m.how == Transfer::sharded ? CheckpointForm::sharded : CheckpointForm::consolidated;
            twins.engine->save(engine_dir, form);
            twins.reference->save(reference_dir, form);
        }
        std::lock_guard<std::mutex> lock(mutex);
        if (comm.rank() == 0) saved = params;
    });
    Config after{name + " after", m.to_ranks, m.to, m.optimizer};
    run_inprocess(m.to_ranks, [&](Communicator &comm) {
        Twins twins(comm, after, nullptr);
        if (m.how == Transfer::serialized) {
            twins.reference->deserialize(engine_bytes);
            twins.engine->deserialize(reference_bytes);
        } else {
            twins.reference->load(engine_dir);
            twins.engine->load(reference_dir);
        }
        const std::vector<float> loaded = twins.expect_same(comm.rank(), after.name + " loaded", mutex);
        {
            std::lock_guard<std::mutex> lock(mutex);
            BOOST_TEST(twins.engine->step_count() == steps, after.name);
            // Replicas (LocalSGD) differ by rank; everything else is rank 0's.
            if (comm.rank() == 0 || m.to.strategy != Strategy::local_sgd)
                BOOST_TEST(std::memcmp(loaded.data(), saved.data(), saved.size() * sizeof(float)) == 0,
                           after.name << " rank " << comm.rank() << ": loaded parameters are not the saved ones");
        }
        twins.train(comm.rank(), steps, steps, after, mutex);
        twins.expect_same(comm.rank(), after.name + " resumed", mutex);
    });
}

ShardingOptions hsdp(int replicas) {
    ShardingOptions o = with(Strategy::hybrid);
    o.hybrid_data_strategy = Strategy::fsdp;
    o.hsdp_replicas = replicas;
    return o;
}

} // namespace

BOOST_AUTO_TEST_SUITE(step_engine)

BOOST_AUTO_TEST_CASE(every_strategy_threaded_and_overlapped_matches_the_reference) {
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

    // LAMB's per-tensor statistics summed across the shards of split tensors.
    Config lamb_sharded{"zero2 lamb x3", 3, with(Strategy::zero2), OptimizerOptions::defaults(OptimizerKind::lamb)};
    expect_same_training(lamb_sharded);

    // Issue 37's element-wise rules: no statistics, so any cut of a tensor updates alike.
    Config lion{"zero2 lion x3", 3, with(Strategy::zero2), OptimizerOptions::defaults(OptimizerKind::lion)};
    lion.optimizer.weight_decay = 0.1;
    expect_same_training(lion);
    Config nadam{"fsdp nadam x2", 2, with(Strategy::fsdp), OptimizerOptions::defaults(OptimizerKind::nadam)};
    nadam.optimizer.decoupled_weight_decay = true;
    nadam.optimizer.weight_decay = 1e-2;
    expect_same_training(nadam);
    Config adamax{"zero1 adamax x3", 3, with(Strategy::zero1), OptimizerOptions::defaults(OptimizerKind::adamax)};
    expect_same_training(adamax);
    Config adadelta{"ddp adadelta x2", 2, with(Strategy::ddp), OptimizerOptions::defaults(OptimizerKind::adadelta)};
    expect_same_training(adadelta);
}

// The element-wise rules of issue 37 give the same parameters under every strategy at one world
// size (each element's update reads only its own gradient and state).
BOOST_AUTO_TEST_CASE(new_elementwise_rules_agree_across_strategies) {
    std::mutex &mutex = assertion_mutex();
    for (OptimizerKind kind : {OptimizerKind::adam, OptimizerKind::lion, OptimizerKind::nadam, OptimizerKind::adamax,
                               OptimizerKind::adadelta}) {
        for (int ranks : {1, 2, 3, 5}) {
            std::vector<std::vector<float>> results;
            for (Strategy s : {Strategy::ddp, Strategy::zero1, Strategy::zero2, Strategy::fsdp}) {
                std::vector<float> params(test_elements());
                run_inprocess(ranks, [&](Communicator &comm) {
                    const Config config{"agree", ranks, with(s), OptimizerOptions::defaults(kind)};
                    auto opt = ShardedOptimizer::create(comm.shared_from_this(), test_layout(), config.optimizer,
                                                        plain(config.sharding));
                    std::vector<float> packed(test_elements());
                    for (int step = 1; step <= 4; ++step) {
                        opt->get_parameters(packed.data());
                        train_step(*opt, packed, comm.rank(), step, config);
                    }
                    opt->get_parameters(packed.data());
                    if (comm.rank() == 0) {
                        std::lock_guard<std::mutex> lock(mutex);
                        params = packed;
                    }
                });
                results.push_back(params);
            }
            for (std::size_t i = 1; i < results.size(); ++i)
                BOOST_TEST(std::memcmp(results[i].data(), results[0].data(), results[0].size() * sizeof(float)) == 0,
                           optimizer_kind_name(kind) << " x" << ranks << ": strategy " << i << " differs from ddp");
        }
    }
}

// What async SGD cannot run is refused, not run as something else.
BOOST_AUTO_TEST_CASE(rules_async_sgd_lacks_are_refused) {
    run_inprocess(2, [&](Communicator &comm) {
        for (const auto &refused : // a pair, not a structured binding: C++17 lambdas cannot capture those
             std::vector<std::pair<OptimizerOptions, std::string>>{
                 {OptimizerOptions::defaults(OptimizerKind::muon), "muon"},
                 {OptimizerOptions::defaults(OptimizerKind::adafactor), "adafactor"}})
            expect_error(ErrorCode::unsupported, refused.second, [&] {
                ShardedOptimizer::create(comm.shared_from_this(), test_layout(), refused.first, with(Strategy::async_sgd));
            });
    });
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
    std::mutex &mutex = assertion_mutex();
    run_inprocess(4, [&](Communicator &comm) {
        for (Strategy s : {Strategy::ddp, Strategy::zero2, Strategy::fsdp}) {
            auto opt = ShardedOptimizer::create(comm.shared_from_this(), test_layout(), OptimizerOptions::defaults(OptimizerKind::adam),
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

// GatherOrder: the second step's prefetch guesses are the first step's next units, nothing after
// its last; the first step guesses the direction of travel, and so does a step once it strays.
BOOST_AUTO_TEST_CASE(gather_order_replays_the_previous_step) {
    const std::vector<int> walk = {4, 5, 2, 3, 0, 1, 0, 1, 2, 3, 4, 5};
    engine::GatherOrder order;
    std::vector<int> first, second;
    for (int b : walk) first.push_back(order.next_after(b, 6));
    BOOST_TEST(order.next_after(5, 6) == first.back()); // asked again: the same guess, not recorded
    order.end_step();
    for (int b : walk) second.push_back(order.next_after(b, 6));
    BOOST_TEST(first == (std::vector<int>{5, -1, 1, 4, -1, 2, -1, 2, 3, 4, 5, -1}), boost::test_tools::per_element());
    BOOST_TEST(second == (std::vector<int>{5, 2, 3, 0, 1, 0, 1, 2, 3, 4, 5, -1}), boost::test_tools::per_element());
    order.end_step();
    order.end_step(); // a step that gathered nothing keeps the record
    BOOST_TEST(order.next_after(4, 6) == 5);
    BOOST_TEST(order.next_after(3, 6) == 2); // strayed: down from 4 to 3, so 2
    BOOST_TEST(order.next_after(2, 6) == 1); // and stays off the record for the rest of the step
}

// FSDP's prefetch follows the previous step's order of gathers (src/sharding/engine/gather_order):
// a walk that is not the layout's (units of two buckets walked up while the units go down, as
// shardopt.torch gathers a module) sends, from the second step on, exactly what the same walk
// without prefetch sends (no unit gathered that is not used next), trains to the same bits, and
// never holds more gathered units than the memory plan counts (two).
BOOST_AUTO_TEST_CASE(fsdp_prefetch_follows_the_previous_steps_order) {
    ParameterSet layout(DType::f32, 1024);
    for (int t = 0; t < 6; ++t) {
        layout.add("t" + std::to_string(t), 96 + std::size_t(t));
        layout.end_bucket();
    }
    // Units {4,5}, {2,3}, {0,1}: the forward visits them down, each bucket of a unit up; the
    // backward visits units and buckets up.
    const std::vector<int> forward = {4, 5, 2, 3, 0, 1}, backward = {0, 1, 2, 3, 4, 5};
    struct Seen {
        std::uint64_t later_steps_bytes = 0;
        std::size_t peak = 0, planned_peak = 0;
        std::vector<float> params;
    };
    std::size_t unit_bytes = 0; // a gathered unit's buffer
    std::vector<Seen> seen(4); // rank 0 and 1, prefetch on then off
    run_inprocess(2, [&](Communicator &comm) {
        for (bool prefetch : {true, false}) {
            ShardingOptions o = with(Strategy::fsdp);
            o.fsdp_prefetch = prefetch;
            const OptimizerOptions adam = OptimizerOptions::defaults(OptimizerKind::adam);
            const std::vector<float> initial = initial_values(6 * 96 + 15);
            auto opt = ShardedOptimizer::create(comm.shared_from_this(), layout, adam, o, initial.data());
            const ParameterSet &planned = opt->layout();
            Seen &mine = seen[std::size_t(comm.rank() + (prefetch ? 0 : 2))];
            std::uint64_t after_first = 0;
            for (int step = 0; step < 3; ++step) {
                opt->zero_grad();
                for (int b : forward) {
                    opt->gather(b);
                    opt->release(b);
                }
                for (int b : backward) {
                    const auto *w = static_cast<const float *>(opt->gather(b));
                    auto *g = static_cast<float *>(opt->bucket_grad(b));
                    for (std::size_t i = 0; i < planned.bucket(b).count; ++i)
                        g[i] = gradient(w[i], i, comm.rank(), step);
                    opt->grad_ready(b);
                    opt->release(b);
                }
                opt->step();
                if (step == 0) after_first = comm.bytes_sent();
            }
            mine.later_steps_bytes = comm.bytes_sent() - after_first;
            mine.peak = opt->memory_stats().peak_buffer_bytes;
            if (comm.rank() == 0) unit_bytes = planned.max_bucket_padded() * sizeof(float);
            mine.planned_peak =
                planner::rank_memory(layout, adam, o, comm.size(), comm.rank(), {}, false, -1).peak_buffer_bytes;
            mine.params.resize(planned.element_count());
            opt->get_parameters(mine.params.data());
        }
    });
    for (int rank = 0; rank < 2; ++rank) {
        const Seen &on = seen[std::size_t(rank)], &off = seen[std::size_t(rank + 2)];
        BOOST_TEST(on.later_steps_bytes == off.later_steps_bytes, "rank " << rank);
        BOOST_TEST(on.peak == on.planned_peak, "rank " << rank);
        BOOST_TEST(on.peak == off.peak + unit_bytes, "rank " << rank); // the prefetch held a second unit
        BOOST_TEST(on.params == off.params, "rank " << rank);
        BOOST_TEST_MESSAGE("rank " << rank << ": later steps sent " << on.later_steps_bytes << " bytes; peak buffers "
                                   << on.peak << " with prefetch, " << off.peak << " without");
    }
}

// optimize(): the twin's training loop gives the reference's result exactly.
BOOST_AUTO_TEST_CASE(optimize_matches_sharded_optimizer) {
    // Mean over the samples of 0.5 * |w - target(s)|^2, target(s)[i] = sin(s + 0.01 i).
    const ModelFunction model = [](const void *params, void *grad, const std::int64_t *samples, std::size_t count) {
        const auto *w = static_cast<const float *>(params);
        auto *g = static_cast<float *>(grad);
        const std::size_t n = test_elements();
        double loss = 0.0;
        for (std::size_t k = 0; k < count; ++k)
            for (std::size_t i = 0; i < n; ++i) {
                const float d = w[i] - std::sin(float(samples[k]) + 0.01f * float(i));
                loss += 0.5 * double(d) * double(d);
                g[i] += d / float(count);
            }
        return loss / double(count);
    };
    OptimizeOptions run;
    run.num_samples = 37;
    run.batch_size = 8;
    run.epochs = 4;
    run.patience = 2;
    std::mutex &mutex = assertion_mutex();
    for (Strategy s : {Strategy::zero2, Strategy::fsdp})
        run_inprocess(3, [&](Communicator &comm) {
            const std::vector<float> init = initial_values(test_elements());
            auto reference = ShardedOptimizer::create(comm.shared_from_this(), test_layout(),
                                                      OptimizerOptions::defaults(OptimizerKind::adam), with(s),
                                                      init.data());
            auto engine = ShardedOptimizer::create(comm.shared_from_this(), test_layout(), OptimizerOptions::defaults(OptimizerKind::adam),
                                                            with(s), init.data());
            const OptimizeResult a = reference->optimize(model, run);
            const OptimizeResult b = engine->optimize(model, run);
            std::lock_guard<std::mutex> lock(mutex);
            BOOST_TEST(a.iterations == b.iterations, strategy_name(s));
            BOOST_TEST(a.iterations == 4 * 5, strategy_name(s)); // 37 samples in batches of 8
            BOOST_TEST(a.loss_history == b.loss_history, strategy_name(s));
            BOOST_TEST(a.best_loss == b.best_loss, strategy_name(s));
            BOOST_TEST(a.loss_history.back() < a.loss_history.front(), strategy_name(s) << ": no progress");
            BOOST_TEST(a.best_parameters == b.best_parameters, strategy_name(s));
            BOOST_TEST(engine->step_count() == reference->step_count(), strategy_name(s));
        });
}

BOOST_AUTO_TEST_CASE(refusals) {
    run_inprocess(2, [&](Communicator &comm) {
        auto fsdp = ShardedOptimizer::create(comm.shared_from_this(), test_layout(), OptimizerOptions::defaults(OptimizerKind::adam),
                                                      with(Strategy::fsdp));
        expect_error(ErrorCode::invalid_state, "sharded", [&] { fsdp->parameters(); });
        expect_error(ErrorCode::invalid_state, "not gathered", [&] { fsdp->tensor_parameters(0); });
        expect_error(ErrorCode::invalid_argument, "null", [&] { fsdp->get_parameters(nullptr); });
        fsdp->zero_grad();
        fsdp->grad_ready(0);
        expect_error(ErrorCode::invalid_state, "twice", [&] { fsdp->grad_ready(0); });
    });
    // cuda memory puts the engine on the communicator's GPU: a host communicator has none.
    run_inprocess(1, [&](Communicator &comm) {
#ifdef SHARDOPT_HAVE_CUDA
        const ErrorCode expected = ErrorCode::invalid_argument;
        const std::string needle = "has no device";
#else
        const ErrorCode expected = ErrorCode::unsupported;
        const std::string needle = "CUDA";
#endif
        expect_error(expected, needle, [&] {
            ShardingOptions cuda = with(Strategy::ddp);
            cuda.memory = MemorySpace::cuda;
            ShardedOptimizer::create(comm.shared_from_this(), test_layout(), OptimizerOptions::defaults(OptimizerKind::adam),
                                     cuda);
        });
    });
}


BOOST_AUTO_TEST_CASE(checkpoints_move_between_the_twins) {
    expect_cross_resume({"zero2 x4 -> fsdp x2", 4, with(Strategy::zero2), 2, with(Strategy::fsdp), Transfer::sharded});
    expect_cross_resume(
        {"fsdp x2 -> ddp x3", 2, with(Strategy::fsdp), 3, with(Strategy::ddp), Transfer::consolidated});
    expect_cross_resume({"hsdp 2x2 -> zero1 x1", 4, hsdp(2), 1, with(Strategy::zero1), Transfer::sharded});
    expect_cross_resume({"zero1 x3 -> hsdp 2x2", 3, with(Strategy::zero1), 4, hsdp(2), Transfer::serialized});

    Move amsgrad{"ddp x1 -> zero2 x4, amsgrad", 1, with(Strategy::ddp), 4, with(Strategy::zero2), Transfer::consolidated};
    amsgrad.optimizer.amsgrad = true; // three state slots
    expect_cross_resume(amsgrad);

    Move adagrad{"zero2 x2 -> fsdp x3, adagrad", 2, with(Strategy::zero2), 3, with(Strategy::fsdp), Transfer::serialized,
                 OptimizerOptions::defaults(OptimizerKind::adagrad)};
    adagrad.optimizer.initial_accumulator_value = 0.1;
    expect_cross_resume(adagrad);

    // LocalSGD at the same world size: each rank resumes its own replica.
    ShardingOptions local = with(Strategy::local_sgd);
    local.local_sgd_period = 3;
    Move sgd{"local_sgd x3 -> local_sgd x3, sgd momentum", 3, local, 3, local, Transfer::sharded,
             OptimizerOptions::defaults(OptimizerKind::sgd)};
    sgd.optimizer.momentum = 0.9;
    expect_cross_resume(sgd);

    // Issue 37's element-wise rules: one slot (Lion), two (NAdam, Adadelta).
    for (OptimizerKind k : {OptimizerKind::lion, OptimizerKind::nadam, OptimizerKind::adadelta}) {
        Move m{std::string("zero2 x4 -> fsdp x3, ") + optimizer_kind_name(k), 4, with(Strategy::zero2), 3,
               with(Strategy::fsdp), Transfer::sharded, OptimizerOptions::defaults(k)};
        expect_cross_resume(m);
        Move c{std::string("fsdp x2 -> ddp x5, ") + optimizer_kind_name(k), 2, with(Strategy::fsdp), 5,
               with(Strategy::ddp), Transfer::serialized, OptimizerOptions::defaults(k)};
        expect_cross_resume(c);
    }
}

BOOST_AUTO_TEST_CASE(bad_checkpoints_change_nothing) {
    TempDir dir;
    std::mutex &mutex = assertion_mutex();
    const Config config{"zero2 x2", 2, with(Strategy::zero2)};
    run_inprocess(2, [&](Communicator &comm) {
        const std::vector<float> init = initial_values(test_elements());
        Twins twins(comm, config, init.data());
        twins.train(comm.rank(), 0, 3, config, mutex);
        const std::vector<unsigned char> bytes = twins.engine->serialize();

        std::vector<unsigned char> flipped = bytes;
        flipped[flipped.size() - 3] ^= 0x40; // the data of the last segment: its checksum fails
        expect_error(ErrorCode::corrupt, "", [&] { twins.engine->deserialize(flipped); });
        const std::vector<unsigned char> truncated(bytes.begin(), bytes.begin() + std::ptrdiff_t(bytes.size() / 2));
        expect_error(ErrorCode::corrupt, "", [&] { twins.engine->deserialize(truncated); });
        expect_error(ErrorCode::invalid_argument, "null", [&] { twins.engine->deserialize(nullptr, 10); });
        expect_error(ErrorCode::io, "no checkpoint", [&] { twins.engine->load(dir.sub("missing")); });
        // A checkpoint of another rule (SGD with momentum: one state slot) is refused.
        OptimizerOptions sgd = OptimizerOptions::defaults(OptimizerKind::sgd);
        sgd.momentum = 0.9;
        auto other = ShardedOptimizer::create(comm.shared_from_this(), test_layout(), sgd, with(Strategy::fsdp));
        other->save(dir.sub("sgd"));
        expect_error(ErrorCode::invalid_argument, "sgd", [&] { twins.engine->load(dir.sub("sgd")); });

        // Nothing changed: parameters, step count and state (training goes on exactly as the
        // reference's, which saw none of this).
        twins.expect_same(comm.rank(), "after refused loads", mutex);
        twins.train(comm.rank(), 3, 2, config, mutex);
        twins.expect_same(comm.rank(), "training after refused loads", mutex);

        // The good bytes take both back to step 3, from where they train alike again.
        twins.engine->deserialize(bytes);
        twins.reference->deserialize(bytes);
        {
            std::lock_guard<std::mutex> lock(mutex);
            BOOST_TEST(twins.engine->step_count() == 3);
        }
        twins.train(comm.rank(), 3, 2, config, mutex);
        twins.expect_same(comm.rank(), "resumed from the serialized bytes", mutex);
    });
}

BOOST_AUTO_TEST_CASE(refused_mid_accumulation_and_for_tensor_parallel_grids) {
    run_inprocess(2, [&](Communicator &comm) {
        ShardingOptions accumulate = with(Strategy::zero2);
        accumulate.gradient_accumulation_steps = 2;
        const Config config{"accumulate", 2, accumulate};
        auto engine = ShardedOptimizer::create(comm.shared_from_this(), test_layout(), config.optimizer, accumulate);
        const std::vector<float> init = initial_values(test_elements());
        train_step(*engine, init, comm.rank(), 0, config); // one micro-step of two
        expect_error(ErrorCode::invalid_state, "gradient accumulation", [&] { engine->serialize(); });
    });
    run_inprocess(4, [&](Communicator &comm) {
        ShardingOptions tp = with(Strategy::hybrid);
        tp.tensor_parallel_size = 2;
        auto engine = ShardedOptimizer::create(comm.shared_from_this(), test_layout(), OptimizerOptions::defaults(OptimizerKind::adam), tp);
        TempDir dir;
        expect_error(ErrorCode::unsupported, "tensor parallelism", [&] { engine->save(dir.path); });
    });
}

BOOST_AUTO_TEST_CASE(synchronize_optimizer_state_of_the_twins) {
    std::mutex &mutex = assertion_mutex();
    // LocalSGD replicas drift apart between averagings; synchronizing averages parameters and
    // state as ShardedOptimizer does.
    ShardingOptions local = with(Strategy::local_sgd);
    local.local_sgd_period = 10;
    for (const Config &config : {Config{"local_sgd x3", 3, local}, Config{"hsdp 2x2", 4, hsdp(2)},
                                 Config{"ddp x2", 2, with(Strategy::ddp)}}) {
        run_inprocess(config.ranks, [&](Communicator &comm) {
            const std::vector<float> init = initial_values(test_elements());
            Twins twins(comm, config, init.data());
            twins.train(comm.rank(), 0, 3, config, mutex);
            std::vector<float> drifted(twins.count());
            twins.reference->get_parameters(drifted.data()); // collective for FSDP
            if (comm.rank() == 1) { // rank 1 drifts: rank 0's copy (or the average) wins
                for (float &x : drifted) x += 0.25f;
                twins.reference->set_parameters(drifted.data());
                twins.engine->set_parameters(drifted.data());
            }
            twins.reference->synchronize_optimizer_state();
            twins.engine->synchronize_optimizer_state();
            twins.expect_same(comm.rank(), config.name + " synchronized", mutex);
            twins.train(comm.rank(), 3, 3, config, mutex);
            twins.expect_same(comm.rank(), config.name + " synchronized and trained", mutex);
        });
    }
}

BOOST_AUTO_TEST_CASE(state_disagreement_and_early_stop) {
    run_inprocess(3, [&](Communicator &comm) {
        auto engine = ShardedOptimizer::create(comm.shared_from_this(), test_layout(), OptimizerOptions::defaults(OptimizerKind::adam),
                                                        with(Strategy::zero1));
        const bool none = engine->should_early_stop(false), one = engine->should_early_stop(comm.rank() == 2);
        {
            std::lock_guard<std::mutex> lock(assertion_mutex());
            BOOST_TEST(!none);
            BOOST_TEST(one);
        }
        engine->synchronize_optimizer_state(); // agreeing ranks: fine
        engine->set_learning_rate(comm.rank() == 1 ? 0.01 : 0.001);
        expect_error(ErrorCode::mismatch, "learning rate", [&] { engine->synchronize_optimizer_state(); });
    });
}

BOOST_AUTO_TEST_SUITE_END()

// Ranks that disagree are caught when the optimizer is created, on every rank, naming the first
// difference; initial parameters are rank 0's unless the caller keeps its own.
BOOST_AUTO_TEST_SUITE(rank_agreement)

BOOST_AUTO_TEST_CASE(different_layouts_fail_naming_the_tensor) {
    run_inprocess(3, [&](Communicator &comm) {
        ParameterSet layout(DType::f32, 1024);
        layout.add("w1", 301);
        layout.add(comm.rank() == 2 ? "w2_renamed" : "w2", 64); // same sizes: training would run
        expect_error(ErrorCode::mismatch, "tensor 1 ('w2", [&] {
            ShardedOptimizer::create(comm.shared_from_this(), layout, OptimizerOptions::defaults(OptimizerKind::adam),
                                     with(Strategy::ddp));
        });
        ParameterSet sized(DType::f32, 1024);
        sized.add("w1", comm.rank() == 1 ? 300 : 301);
        expect_error(ErrorCode::mismatch, "'w1' on rank " + std::to_string(comm.rank()) + "), its element count", [&] {
            ShardedOptimizer::create(comm.shared_from_this(), sized, OptimizerOptions::defaults(OptimizerKind::adam),
                                     with(Strategy::zero2));
        });
        ParameterSet fewer(DType::f32, 1024);
        fewer.add("w1", 301);
        if (comm.rank() == 0) fewer.add("extra", 5);
        expect_error(ErrorCode::mismatch, "the number of tensors", [&] {
            ShardedOptimizer::create(comm.shared_from_this(), fewer, OptimizerOptions::defaults(OptimizerKind::adam),
                                     with(Strategy::fsdp));
        });
    });
}

BOOST_AUTO_TEST_CASE(different_options_fail_naming_the_option) {
    run_inprocess(2, [&](Communicator &comm) {
        ShardingOptions o = with(Strategy::zero2);
        if (comm.rank() == 1) o.gradient_accumulation_steps = 2;
        expect_error(ErrorCode::mismatch, "gradient_accumulation_steps", [&] {
            ShardedOptimizer::create(comm.shared_from_this(), test_layout(), OptimizerOptions::defaults(OptimizerKind::adam), o);
        });
        OptimizerOptions adam = OptimizerOptions::defaults(OptimizerKind::adam);
        if (comm.rank() == 0) adam.beta2 = 0.99;
        expect_error(ErrorCode::mismatch, "beta2", [&] {
            ShardedOptimizer::create(comm.shared_from_this(), test_layout(), adam, with(Strategy::ddp));
        });
    });
}

BOOST_AUTO_TEST_CASE(initial_parameters_are_rank_0s_unless_kept) {
    std::mutex &mutex = assertion_mutex();
    for (bool keep : {false, true})
        for (Strategy s : {Strategy::ddp, Strategy::fsdp, Strategy::local_sgd})
            run_inprocess(3, [&](Communicator &comm) {
                std::vector<float> mine = initial_values(test_elements());
                for (float &x : mine) x += float(comm.rank()); // every rank was given other values
                ShardingOptions o = with(s);
                o.broadcast_initial = !keep;
                auto opt = ShardedOptimizer::create(comm.shared_from_this(), test_layout(),
                                                    OptimizerOptions::defaults(OptimizerKind::adam), o, mine.data());
                std::vector<float> got(test_elements());
                opt->get_parameters(got.data());
                std::vector<float> rank0 = initial_values(test_elements());
                std::lock_guard<std::mutex> lock(mutex);
                if (!keep) BOOST_TEST(got == rank0, strategy_name(s) << " rank " << comm.rank());
                else if (s != Strategy::fsdp) BOOST_TEST(got == mine, strategy_name(s) << " rank " << comm.rank());
            });
}

BOOST_AUTO_TEST_SUITE_END()

// optimize() with shuffle: every epoch visits every sample exactly once across the ranks (they
// drew the same permutation), epochs differ, and the seed alone decides the order.
BOOST_AUTO_TEST_SUITE(optimize_shuffle)

// `per_call`: one optimize() call per epoch, numbered with first_epoch; else one call for all.
std::vector<std::vector<std::int64_t>> visited_orders(bool shuffle, std::uint64_t seed, bool per_call = false) {
    constexpr int ranks = 2, epochs = 3;
    std::vector<std::vector<std::vector<std::int64_t>>> seen(ranks); // rank -> batch -> samples
    run_inprocess(ranks, [&](Communicator &comm) {
        auto opt = ShardedOptimizer::create(comm.shared_from_this(), test_layout(),
                                            OptimizerOptions::defaults(OptimizerKind::sgd), with(Strategy::ddp));
        const ModelFunction model = [&](const void *, void *, const std::int64_t *samples, std::size_t count) {
            seen[std::size_t(comm.rank())].emplace_back(samples, samples + count);
            return 1.0;
        };
        OptimizeOptions run;
        run.num_samples = 20;
        run.batch_size = 8;
        run.epochs = per_call ? 1 : epochs;
        run.shuffle = shuffle;
        run.seed = seed;
        for (int e = 0; e < (per_call ? epochs : 1); ++e) {
            run.first_epoch = e;
            opt->optimize(model, run);
        }
    });
    std::vector<std::vector<std::int64_t>> orders(epochs); // epoch -> the global order
    const std::size_t batches = seen[0].size() / epochs;
    for (std::size_t k = 0; k < seen[0].size(); ++k)
        for (int r = 0; r < ranks; ++r)
            orders[k / batches].insert(orders[k / batches].end(), seen[std::size_t(r)][k].begin(),
                                       seen[std::size_t(r)][k].end());
    return orders;
}

BOOST_AUTO_TEST_CASE(one_permutation_per_epoch_shared_by_the_ranks) {
    const auto plain = visited_orders(false, 0);
    std::vector<std::int64_t> identity(20);
    for (int i = 0; i < 20; ++i) identity[std::size_t(i)] = i;
    for (const auto &order : plain) BOOST_TEST(order == identity);

    const auto a = visited_orders(true, 7), again = visited_orders(true, 7), other = visited_orders(true, 8);
    for (const auto &order : a) {
        std::vector<std::int64_t> sorted = order;
        std::sort(sorted.begin(), sorted.end());
        BOOST_TEST(sorted == identity); // each sample once: the ranks drew the same permutation
        BOOST_TEST(order != identity);
    }
    BOOST_TEST(a[0] != a[1]);
    BOOST_TEST(a == again);
    BOOST_TEST(a != other);
    // Epoch by epoch, each call numbered with first_epoch: the orders of one call over all epochs.
    BOOST_TEST(visited_orders(true, 7, true) == a);
}

BOOST_AUTO_TEST_SUITE_END()

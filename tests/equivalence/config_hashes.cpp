// config_hashes: trains every configuration of the optimizers a few steps, in-process, and prints
// one line per configuration with hashes of what it ended with, so a change that must not alter
// results (a refactoring) can be checked bit for bit: run it before and after and compare.
//
//   build/tests/config_hashes > before.txt      (one line per configuration, sorted by name)
//   build/tests/config_hashes --check tests/equivalence/config_hashes.txt   (ctest: equivalence.config_hashes)
//   build/tests/config_hashes --filter zero2     (the configurations whose name contains "zero2")
//
// Configurations: every strategy (ddp, zero1, zero2, fsdp, local_sgd, hybrid grids of data x
// tensor x pipeline with each data strategy inside, HSDP, async_sgd at staleness 0) x base rule
// (sgd with and without momentum, adam, adamw, rmsprop, adagrad, lamb) x dtype (f32, f64) x
// options (gradient accumulation, clipping, skipped non-finite steps, every compression method,
// overlap_param_gather, staging buffers, FSDP prefetch, update threads on a layout large enough
// to use them, LocalSGD's period) x world sizes 1-4; and the step engine on the emulated device
// space of the unit tests (tests/unit/emulated_device_space.hpp), without and with each
// ZeRO-Offload mode. Each trains a few steps of the step protocol (buckets marked ready in
// reverse, FSDP units gathered and released around them) and then one optimize() call of two
// epochs (shuffled), except async_sgd, which trains through optimize() only.
//
// Per line: params = every rank's final packed parameters; state = serialize()'s bytes (the
// consolidated checkpoint: parameters, optimizer state, step count, options; its random
// generation left out); steps = every rank's StepResult fields and the optimize() result (loss
// history, best loss, best parameters, iterations); mem = memory_stats() and bytes_sent(); trace
// (emulated device only) = how many copies, waits and collectives the engine asked the space for,
// and their bytes. A configuration an optimizer refuses prints its error code and message instead.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "emulated_device_space.hpp"
#include "sharding/engine/step_engine.hpp"
#include "training/optimize_options.hpp"
#include "training/trainer.hpp"
#include "shardopt/error.hpp"
#include "shardopt/inprocess.hpp"
#include "shardopt/sharded_optimizer.hpp"

using namespace shardopt;

namespace {

// --- hashing ------------------------------------------------------------------------------------
struct Hash {
    std::uint64_t h = 1469598103934665603ull; // FNV-1a 64
    void bytes(const void *data, std::size_t n) {
        const auto *p = static_cast<const unsigned char *>(data);
        for (std::size_t i = 0; i < n; ++i) {
            h ^= p[i];
            h *= 1099511628211ull;
        }
    }
    template <typename T> void value(const T &v) { bytes(&v, sizeof v); }
    void text(const std::string &s) {
        value(std::uint64_t(s.size()));
        bytes(s.data(), s.size());
    }
    std::string hex() const {
        char out[17];
        std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
        return out;
    }
};

// serialize()'s bytes without the random generation in its header (and so without the header's
// checksum): preamble, header with the generation blanked, data.
void hash_checkpoint(Hash &hash, std::vector<unsigned char> bytes) {
    if (bytes.size() < 32) return hash.bytes(bytes.data(), bytes.size());
    std::uint64_t header = 0;
    std::memcpy(&header, bytes.data() + 16, 8);
    std::memset(bytes.data() + 24, 0, 8);
    std::string json(reinterpret_cast<const char *>(bytes.data()) + 32, std::size_t(header));
    const std::string key = "\"generation\":\"";
    const std::size_t at = json.find(key);
    if (at != std::string::npos)
        for (std::size_t i = at + key.size(); i < json.size() && json[i] != '"'; ++i) json[i] = '-';
    std::memcpy(bytes.data() + 32, json.data(), json.size());
    hash.bytes(bytes.data(), bytes.size());
}

// --- configurations ------------------------------------------------------------------------------
struct Rule {
    const char *name;
    OptimizerOptions options;
};

std::vector<Rule> rules() {
    auto with = [](OptimizerKind kind, double lr) {
        OptimizerOptions o = OptimizerOptions::defaults(kind);
        o.lr = lr;
        return o;
    };
    OptimizerOptions sgd = with(OptimizerKind::sgd, 0.05);
    OptimizerOptions momentum = sgd;
    momentum.momentum = 0.9;
    momentum.nesterov = true;
    OptimizerOptions adamw = with(OptimizerKind::adamw, 0.01);
    adamw.weight_decay = 0.01;
    OptimizerOptions rmsprop = with(OptimizerKind::rmsprop, 0.01);
    rmsprop.centered = true;
    rmsprop.momentum = 0.5;
    OptimizerOptions lamb = with(OptimizerKind::lamb, 0.01);
    lamb.weight_decay = 0.01;
    return {{"sgd", sgd},
            {"sgd_momentum", momentum},
            {"adam", with(OptimizerKind::adam, 0.01)},
            {"adamw", adamw},
            {"rmsprop", rmsprop},
            {"adagrad", with(OptimizerKind::adagrad, 0.05)},
            {"lamb", lamb}};
}

struct Config {
    std::string name;
    int ranks = 1;
    DType dtype = DType::f32;
    OptimizerOptions optimizer;
    ShardingOptions sharding;
    bool emulated = false; // the step engine on the emulated device space
    bool big = false;      // a layout large enough for the update to use several threads
    int protocol_steps = 3;
    bool mark_ready = true; // grad_ready per bucket (else step() reduces them all)
    int nonfinite_step = -1;
};

// The tensors (name, elements, rows for a matrix, replicated across tensor-parallel ranks).
struct TensorSpec {
    const char *name;
    std::size_t rows, cols;
    bool tp_replicated;
};
const TensorSpec kTensors[] = {{"fc1.weight", 6, 9, false}, {"fc1.bias", 1, 7, false}, {"fc2.weight", 5, 6, false},
                               {"fc2.bias", 1, 5, true},    {"emb", 1, 41, false},     {"head", 4, 8, false}};

// The layout of this rank: the tensors of its pipeline stage (tensor i in stage i % pp).
ParameterSet make_layout(const Config &c, int stage, int stages) {
    ParameterSet layout(c.dtype, 256);
    for (std::size_t i = 0; i < std::size(kTensors); ++i) {
        if (int(i) % stages != stage) continue;
        const TensorSpec &t = kTensors[i];
        if (t.rows > 1) layout.add_matrix(t.name, t.rows, t.cols, t.tp_replicated);
        else layout.add(t.name, t.cols, t.tp_replicated);
    }
    if (c.big) {
        layout.end_bucket();
        layout.add_matrix("big", 300, 250); // 75000 elements: past the threaded update's threshold
    }
    return layout;
}

int stage_of(const Config &c, int rank) {
    const ShardingOptions &o = c.sharding;
    if (o.strategy != Strategy::hybrid) return 0;
    const int pp = o.pipeline_parallel_size, tp = o.tensor_parallel_size;
    const int dp = c.ranks / (pp * tp);
    return rank / (dp * tp);
}
int stages_of(const Config &c) {
    return c.sharding.strategy == Strategy::hybrid ? c.sharding.pipeline_parallel_size : 1;
}

template <typename T> T initial_value(std::size_t i) { return T(0.3) * T(((i * 37) % 23)) / T(23) - T(0.15); }
template <typename T> T target_value(std::size_t i, std::int64_t sample) {
    return T(0.1) * T(std::int64_t((i * 7 + std::size_t(sample) * 3) % 11) - 5);
}
template <typename T> T gradient_value(T p, std::size_t i, int rank, int step) {
    return (p - T(0.1) * T(std::int64_t((i * 7) % 11) - 5)) * T(0.5) +
           T(0.01) * T(std::int64_t((i * 31 + std::size_t(rank) * 7 + std::size_t(step) * 3) % 13) - 6);
}

// --- one rank's run --------------------------------------------------------------------------------
struct RankOutcome {
    std::vector<unsigned char> params;
    std::vector<unsigned char> checkpoint; // rank 0
    Hash steps, memory, trace;
};

std::uint64_t bytes_sent(ShardedOptimizer &o) { return o.bytes_sent(); }
std::uint64_t bytes_sent(engine::StepEngine &e) { return e.bytes_sent(); }

// One step of the protocol: buckets in reverse, FSDP units gathered and released around them,
// gradients through bucket_grad (even steps) or grad(t) (odd steps).
template <typename T, typename Opt>
StepResult protocol_step(Opt &opt, const ParameterSet &layout, const Config &c, int rank, int step) {
    opt.zero_grad();
    for (int b = layout.bucket_count() - 1; b >= 0; --b) {
        const auto &bl = layout.bucket(b);
        const T *params = static_cast<const T *>(opt.gather(b));
        for (int t = bl.first_tensor; t < bl.first_tensor + bl.tensor_count; ++t) {
            const auto &tl = layout.tensor(t);
            T *g = step % 2 == 0 ? static_cast<T *>(opt.bucket_grad(b)) + (tl.offset - bl.offset)
                                 : static_cast<T *>(opt.grad(t));
            for (std::size_t i = 0; i < tl.count; ++i) {
                const std::size_t flat = tl.offset + i;
                g[i] = gradient_value<T>(params[flat - bl.offset], flat, rank, step);
            }
            if (step == c.nonfinite_step && rank == 0 && t == 0) g[0] = std::numeric_limits<T>::quiet_NaN();
        }
        if (c.mark_ready) opt.grad_ready(b);
        opt.release(b);
    }
    return opt.step();
}

void hash_step(Hash &h, const StepResult &r) {
    h.value(r.applied);
    h.value(r.skipped_nonfinite);
    h.value(r.accumulating);
    h.value(r.grad_norm);
    // Not bytes_sent: with overlap_param_gather a step returns while its allgather may still be
    // sending (the total, bytes_sent() at the end, is in the memory hash).
}

void hash_memory(Hash &h, const MemoryStats &m) {
    for (std::size_t v : {m.params_bytes, m.grads_bytes, m.optimizer_state_bytes, m.buffer_bytes, m.peak_buffer_bytes,
                          m.compression_bytes, m.host_params_bytes, m.host_grads_bytes, m.host_optimizer_state_bytes})
        h.value(std::uint64_t(v));
}

template <typename T> ModelFunction model_of(std::size_t n) {
    return [n](const void *params, void *grad, const std::int64_t *samples, std::size_t count) {
        const T *p = static_cast<const T *>(params);
        T *g = static_cast<T *>(grad);
        double loss = 0.0;
        for (std::size_t s = 0; s < count; ++s)
            for (std::size_t i = 0; i < n; ++i) {
                const T d = p[i] - target_value<T>(i, samples[s]);
                loss += 0.5 * double(d) * double(d);
                g[i] += d / T(count);
            }
        return loss / double(count);
    };
}

void hash_optimize(Hash &h, const OptimizeResult &r) {
    h.bytes(r.best_parameters.data(), r.best_parameters.size());
    h.value(r.best_loss);
    for (double l : r.loss_history) h.value(l);
    h.value(r.iterations);
    h.value(r.stopped_early);
}

OptimizeOptions optimize_options() {
    OptimizeOptions o;
    o.num_samples = 10;
    o.batch_size = 4;
    o.epochs = 2;
    o.shuffle = true;
    o.seed = 7;
    o.first_epoch = 1;
    return o;
}

// optimize() on a ShardedOptimizer, or the training loop on a bare step engine (the offloaded one).
template <typename Opt> OptimizeResult run_optimize(Opt &opt, const ModelFunction &model, const OptimizeOptions &o) {
    if constexpr (std::is_same_v<Opt, engine::StepEngine>)
        return training::optimize_result_of(
            training::train(opt, training::batch_function_of(model), training::training_options_of(o)));
    else
        return opt.optimize(model, o);
}

template <typename T, typename Opt>
void train(Opt &opt, const ParameterSet &layout, const Config &c, int rank, RankOutcome &out, bool protocol) {
    const bool tensor_parallel = c.sharding.strategy == Strategy::hybrid && c.sharding.tensor_parallel_size > 1;
    if (protocol)
        for (int step = 0; step < c.protocol_steps * c.sharding.gradient_accumulation_steps; ++step)
            hash_step(out.steps, protocol_step<T>(opt, layout, c, rank, step));
    hash_optimize(out.steps, run_optimize(opt, model_of<T>(layout.element_count()), optimize_options()));
    out.steps.value(opt.step_count());
    out.params.resize(layout.element_count() * sizeof(T));
    opt.get_parameters(out.params.data());
    if (!tensor_parallel) { // checkpoints refuse tensor-parallel grids
        std::vector<unsigned char> bytes = opt.serialize();
        if (rank == 0) out.checkpoint = std::move(bytes);
    }
    hash_memory(out.memory, opt.memory_stats());
    out.memory.value(bytes_sent(opt));
}

template <typename T> void run_rank(Communicator &comm, const Config &c, RankOutcome &out) {
    ParameterSet layout = make_layout(c, stage_of(c, comm.rank()), stages_of(c));
    ParameterSet planned = layout;
    planned.plan(1);
    std::vector<T> initial(planned.element_count());
    for (std::size_t i = 0; i < initial.size(); ++i) initial[i] = initial_value<T>(i);
    if (c.emulated) {
        auto space = std::make_unique<testing::EmulatedDeviceSpace>();
        testing::EmulatedDeviceSpace *emulated = space.get();
        engine::StepEngine engine(std::move(space), comm.shared_from_this(), layout, c.optimizer, c.sharding,
                                  initial.data());
        train<T>(engine, engine.layout(), c, comm.rank(), out, true);
        // How many events of each kind, and their bytes: not their order, which depends on when
        // the in-flight reductions are seen complete (ZeRO-Offload polls them during the backward).
        std::map<int, std::pair<std::uint64_t, std::uint64_t>> kinds;
        for (const testing::TraceEvent &e : emulated->trace) {
            kinds[int(e.kind)].first += 1;
            kinds[int(e.kind)].second += e.bytes;
        }
        for (const auto &[kind, totals] : kinds) {
            out.trace.value(kind);
            out.trace.value(totals.first);
            out.trace.value(totals.second);
        }
        return;
    }
    auto opt = ShardedOptimizer::create(comm.shared_from_this(), layout, c.optimizer, c.sharding, initial.data());
    train<T>(*opt, opt->layout(), c, comm.rank(), out, c.sharding.strategy != Strategy::async_sgd);
}

std::string run(const Config &c) {
    std::vector<RankOutcome> outcomes(std::size_t(c.ranks));
    try {
        run_inprocess(c.ranks, [&](Communicator &comm) {
            RankOutcome &out = outcomes[std::size_t(comm.rank())];
            if (c.dtype == DType::f64) run_rank<double>(comm, c, out);
            else run_rank<float>(comm, c, out);
        });
    } catch (const Error &e) {
        return "error " + std::string(error_code_name(e.code())) + ": " + e.what();
    } catch (const std::exception &e) {
        return std::string("exception: ") + e.what();
    }
    Hash params, state, steps, memory, trace;
    for (const RankOutcome &o : outcomes) {
        params.bytes(o.params.data(), o.params.size());
        steps.value(o.steps.h);
        memory.value(o.memory.h);
        trace.value(o.trace.h);
    }
    hash_checkpoint(state, outcomes[0].checkpoint);
    std::string line = "params=" + params.hex() + " state=" + state.hex() + " steps=" + steps.hex() +
                       " mem=" + memory.hex();
    if (c.emulated) line += " trace=" + trace.hex();
    return line;
}

const char *dtype_label(DType d) { return d == DType::f64 ? "f64" : "f32"; }

std::vector<Config> configurations() {
    std::vector<Config> all;
    const std::vector<Rule> every_rule = rules();
    auto rule = [&](const char *name) {
        for (const Rule &r : every_rule)
            if (std::string(r.name) == name) return r;
        throw std::logic_error(name);
    };
    const std::vector<Rule> some_rules = {rule("sgd_momentum"), rule("adam"), rule("lamb")};
    const DType dtypes[] = {DType::f32, DType::f64};
    auto add = [&](const std::string &name, int ranks, DType dtype, const Rule &r, const ShardingOptions &o) -> Config & {
        Config c;
        c.name = name + " " + r.name + " " + dtype_label(dtype) + " ws" + std::to_string(ranks);
        c.ranks = ranks;
        c.dtype = dtype;
        c.optimizer = r.options;
        c.sharding = o;
        all.push_back(c);
        return all.back();
    };
    auto sharding = [](Strategy s) {
        ShardingOptions o;
        o.strategy = s;
        o.local_sgd_period = 3;
        return o;
    };
    const Strategy flat[] = {Strategy::ddp, Strategy::zero1, Strategy::zero2, Strategy::fsdp, Strategy::local_sgd};
    const GradientCompression methods[] = {GradientCompression::bf16,  GradientCompression::fp16,
                                           GradientCompression::int8,  GradientCompression::int4,
                                           GradientCompression::top_k, GradientCompression::power_sgd};

    // Every flat strategy x rule x dtype x world size, plain.
    for (Strategy s : flat)
        for (int ws = 1; ws <= 4; ++ws)
            for (DType d : dtypes)
                for (const Rule &r : every_rule) add(strategy_name(s), ws, d, r, sharding(s));

    // Options, on three (rule, dtype) pairs.
    const std::pair<Rule, DType> option_rules[] = {
        {rule("adam"), DType::f32}, {rule("lamb"), DType::f64}, {rule("sgd_momentum"), DType::f32}};
    for (Strategy s : flat)
        for (int ws = 1; ws <= 4; ++ws)
            for (const auto &[r, d] : option_rules) {
                const std::string n = strategy_name(s);
                ShardingOptions o = sharding(s);
                o.gradient_accumulation_steps = 2;
                add(n + " accumulate2", ws, d, r, o);
                o = sharding(s);
                o.max_grad_norm = 0.05;
                add(n + " clip", ws, d, r, o);
                o.gradient_accumulation_steps = 3;
                add(n + " clip+accumulate3", ws, d, r, o);
                add(n + " nonfinite", ws, d, r, sharding(s)).nonfinite_step = 1;
                if (ws == 2 || ws == 3) { // step() reduces the buckets never marked ready
                    o = sharding(s);
                    o.staging_buffers = 8; // ZeRO-2, FSDP: a buffer for every bucket left open
                    add(n + " step_reduces", ws, d, r, o).mark_ready = false;
                }
                if (s == Strategy::zero1 || s == Strategy::zero2) {
                    o = sharding(s);
                    o.overlap_param_gather = true;
                    add(n + " overlap_param_gather", ws, d, r, o);
                }
                if (s == Strategy::zero2 || s == Strategy::fsdp) {
                    o = sharding(s);
                    o.staging_buffers = 2;
                    add(n + " staging2", ws, d, r, o);
                }
                if (s == Strategy::fsdp) {
                    o = sharding(s);
                    o.fsdp_prefetch = false;
                    add(n + " no_prefetch", ws, d, r, o);
                }
                if (s == Strategy::local_sgd) {
                    o = sharding(s);
                    o.local_sgd_period = 1;
                    add(n + " period1", ws, d, r, o);
                }
                if (ws == 1) { // host memory: the offload flags are accepted and change nothing
                    o = sharding(s);
                    o.cpu_offload_optimizer = o.cpu_offload_gradients = true;
                    add(n + " offload_flags", ws, d, r, o);
                }
            }
    // One staging buffer and buckets left open: refused, naming them.
    for (Strategy s : {Strategy::zero2, Strategy::fsdp})
        add(std::string(strategy_name(s)) + " step_reduces staging1", 2, DType::f32, rule("adam"), sharding(s))
            .mark_ready = false;

    // Gradient compression: every method on every flat strategy at 2-4 ranks (adam f32), at 2
    // ranks in f64; at 3 ranks with momentum SGD, without error feedback, with clipping and
    // accumulation.
    for (Strategy s : flat)
        for (int ws = 2; ws <= 4; ++ws)
            for (DType d : dtypes)
                for (GradientCompression m : methods) {
                    if (d == DType::f64 && ws != 2) continue;
                    ShardingOptions o = sharding(s);
                    o.compression.method = m;
                    o.compression.ratio = 0.25;
                    o.compression.block_size = 16;
                    o.compression.power_sgd_rank = 2;
                    o.compression.power_sgd_min_elements = 16;
                    const std::string n = std::string(strategy_name(s)) + " compress_" + compression_name(m);
                    add(n, ws, d, rule("adam"), o);
                    if (ws == 3) {
                        add(n, ws, d, rule("sgd_momentum"), o);
                        if (o.compression.keeps_residuals()) {
                            o.compression.error_feedback = false;
                            add(n + "_no_feedback", ws, d, rule("adam"), o);
                            o.compression.error_feedback = true;
                        }
                        o.gradient_accumulation_steps = 2;
                        o.max_grad_norm = 0.05;
                        add(n + " clip+accumulate2", ws, d, rule("adam"), o);
                    }
                }

    // Update threads: a layout past the threaded update's threshold, 1 and 4 threads.
    for (Strategy s : {Strategy::ddp, Strategy::zero1, Strategy::fsdp, Strategy::local_sgd})
        for (int ws : {1, 2})
            for (const Rule &r : {rule("adam"), rule("lamb")})
                for (int threads : {1, 4}) {
                    ShardingOptions o = sharding(s);
                    o.update_threads = threads;
                    add(std::string(strategy_name(s)) + " big threads" + std::to_string(threads), ws, DType::f32, r, o)
                        .big = true;
                }

    // Hybrid grids (pp x tp x dp) with each data strategy inside, and HSDP.
    struct Grid {
        int pp, tp, dp;
    };
    const Grid grids[] = {{1, 2, 1}, {2, 1, 1}, {1, 1, 2}, {1, 3, 1}, {3, 1, 1}, {1, 2, 2}, {2, 1, 2}, {2, 2, 1}};
    for (const Grid &g : grids)
        for (Strategy inside : {Strategy::ddp, Strategy::zero1, Strategy::zero2, Strategy::fsdp})
            for (DType d : dtypes)
                for (const Rule &r : some_rules) {
                    if (d == DType::f64 && r.options.kind != OptimizerKind::adam) continue;
                    ShardingOptions o = sharding(Strategy::hybrid);
                    o.pipeline_parallel_size = g.pp;
                    o.tensor_parallel_size = g.tp;
                    o.data_parallel_size = g.dp;
                    o.hybrid_data_strategy = inside;
                    const std::string n = "hybrid pp" + std::to_string(g.pp) + "tp" + std::to_string(g.tp) + "dp" +
                                          std::to_string(g.dp) + " " + strategy_name(inside);
                    add(n, g.pp * g.tp * g.dp, d, r, o);
                    if (g.dp == 2 && d == DType::f32 && r.options.kind == OptimizerKind::adam) {
                        o.gradient_accumulation_steps = 2;
                        o.max_grad_norm = 0.05;
                        add(n + " clip+accumulate2", g.pp * g.tp * g.dp, d, r, o);
                    }
                }
    for (int ws : {2, 4})
        for (DType d : dtypes)
            for (const Rule &r : some_rules) {
                ShardingOptions o = sharding(Strategy::hybrid);
                o.hybrid_data_strategy = Strategy::fsdp;
                o.hsdp_replicas = 2;
                add("hsdp replicas2", ws, d, r, o);
            }

    // Asynchronous SGD at staleness 0 (DDP's result), every rule.
    for (int ws = 1; ws <= 4; ++ws)
        for (DType d : dtypes)
            for (const Rule &r : every_rule) add("async_sgd staleness0", ws, d, r, sharding(Strategy::async_sgd));

    // The step engine on the emulated device space, without and with each ZeRO-Offload mode.
    struct Mode {
        const char *name;
        bool optimizer, gradients, params;
    };
    const Mode modes[] = {{"device", false, false, false},
                          {"offload_optimizer", true, false, false},
                          {"offload_optimizer+gradients", true, true, false},
                          {"offload_optimizer+params", true, false, true},
                          {"offload_all", true, true, true}};
    for (Strategy s : {Strategy::ddp, Strategy::zero1, Strategy::zero2, Strategy::fsdp})
        for (const Mode &m : modes) {
            if (m.params && s != Strategy::fsdp) continue;
            for (int ws : {1, 2, 3, 4})
                for (DType d : dtypes)
                    for (const Rule &r : some_rules) {
                        // adam and lamb in f32 at every world size; momentum SGD and f64 at 2 ranks
                        if ((d == DType::f64 || r.options.kind == OptimizerKind::sgd) && ws != 2) continue;
                        if (d == DType::f64 && r.options.kind != OptimizerKind::adam) continue;
                        ShardingOptions o = sharding(s);
                        o.cpu_offload_optimizer = m.optimizer;
                        o.cpu_offload_gradients = m.gradients;
                        o.cpu_offload_params = m.params;
                        add(std::string("emulated ") + strategy_name(s) + " " + m.name, ws, d, r, o).emulated = true;
                        if (ws == 2 && d == DType::f32 && r.options.kind == OptimizerKind::adam) {
                            o.gradient_accumulation_steps = 2;
                            o.max_grad_norm = 0.05;
                            add(std::string("emulated ") + strategy_name(s) + " " + m.name + " clip+accumulate2", ws, d,
                                r, o)
                                .emulated = true;
                            o = sharding(s);
                            o.cpu_offload_optimizer = m.optimizer;
                            o.cpu_offload_gradients = m.gradients;
                            o.cpu_offload_params = m.params;
                            add(std::string("emulated ") + strategy_name(s) + " " + m.name + " nonfinite", ws, d, r, o)
                                .emulated = true;
                            all.back().nonfinite_step = 1;
                        }
                    }
        }
    std::sort(all.begin(), all.end(), [](const Config &a, const Config &b) { return a.name < b.name; });
    return all;
}

} // namespace

int main(int argc, char **argv) {
    std::string check, filter;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--check" && i + 1 < argc) check = argv[++i];
        else if (a == "--filter" && i + 1 < argc) filter = argv[++i];
        else {
            std::cerr << "usage: config_hashes [--filter TEXT] [--check EXPECTED_FILE]\n";
            return 2;
        }
    }
    std::ostringstream out;
    int count = 0;
    for (const Config &c : configurations()) {
        if (!filter.empty() && c.name.find(filter) == std::string::npos) continue;
        out << c.name << " | " << run(c) << "\n";
        ++count;
    }
    if (check.empty()) {
        std::cout << out.str();
        std::cerr << count << " configurations\n";
        return 0;
    }
    std::ifstream expected_file(check);
    if (!expected_file) {
        std::cerr << "config_hashes: cannot read " << check << "\n";
        return 2;
    }
    std::map<std::string, std::string> expected;
    for (std::string line; std::getline(expected_file, line);) {
        const std::size_t bar = line.find(" | ");
        if (bar != std::string::npos) expected[line.substr(0, bar)] = line.substr(bar + 3);
    }
    int differ = 0;
    std::istringstream got(out.str());
    for (std::string line; std::getline(got, line);) {
        const std::size_t bar = line.find(" | ");
        const std::string name = line.substr(0, bar), result = line.substr(bar + 3);
        const auto it = expected.find(name);
        if (it == expected.end()) {
            std::cerr << "new: " << line << "\n";
            ++differ;
        } else if (it->second != result) {
            std::cerr << "differs: " << name << "\n  expected " << it->second << "\n  got      " << result << "\n";
            ++differ;
        }
    }
    std::cerr << count << " configurations, " << differ << " differ from " << check << "\n";
    return differ == 0 ? 0 : 1;
}

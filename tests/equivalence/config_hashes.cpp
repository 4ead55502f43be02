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

#include "configurations.hpp"
#include "emulated_device_space.hpp"
#include "sharding/engine/step_engine.hpp"
#include "training/optimize_options.hpp"
#include "training/trainer.hpp"
#include "shardopt/error.hpp"
#include "shardopt/inprocess.hpp"
#include "shardopt/sharded_optimizer.hpp"

using namespace shardopt;
using namespace shardopt::equivalence;

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

// --- one rank's run --------------------------------------------------------------------------------
struct RankOutcome {
    std::vector<unsigned char> params;
    std::vector<unsigned char> checkpoint; // rank 0
    Hash steps, memory, trace;
};

std::uint64_t bytes_sent(ShardedOptimizer &o) { return o.bytes_sent(); }
std::uint64_t bytes_sent(engine::StepEngine &e) { return e.bytes_sent(); }

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

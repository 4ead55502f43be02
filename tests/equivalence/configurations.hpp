// The configurations of the optimizers the equivalence suite trains (config_hashes) and the
// memory plan's exactness test walks (tests/planner/test_memory_plan.cpp): every strategy x base
// rule x dtype x option x world size, the hybrid grids, HSDP, async SGD and the step engine on the
// emulated device space with each ZeRO-Offload mode (see config_hashes.cpp for the list), and the
// step protocol they train with.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "shardopt/sharded_optimizer.hpp"

namespace shardopt::equivalence {

// --- configurations ------------------------------------------------------------------------------
struct Rule {
    const char *name;
    OptimizerOptions options;
};

inline std::vector<Rule> rules() {
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
inline const TensorSpec kTensors[] = {{"fc1.weight", 6, 9, false}, {"fc1.bias", 1, 7, false}, {"fc2.weight", 5, 6, false},
                               {"fc2.bias", 1, 5, true},    {"emb", 1, 41, false},     {"head", 4, 8, false}};

// The layout of this rank: the tensors of its pipeline stage (tensor i in stage i % pp).
inline ParameterSet make_layout(const Config &c, int stage, int stages) {
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

inline int stage_of(const Config &c, int rank) {
    const ShardingOptions &o = c.sharding;
    if (o.strategy != Strategy::hybrid) return 0;
    const int pp = o.pipeline_parallel_size, tp = o.tensor_parallel_size;
    const int dp = c.ranks / (pp * tp);
    return rank / (dp * tp);
}
inline int stages_of(const Config &c) {
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

// Every configuration, sorted by name.
std::vector<Config> configurations();

} // namespace shardopt::equivalence

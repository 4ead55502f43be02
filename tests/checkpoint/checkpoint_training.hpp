// Training driver for the checkpoint tests: the demo MLP trained on in-process ranks with any
// strategy, with hooks to load a checkpoint before training and save one after, so
// "train 50, save, load elsewhere, train 50" can be compared with 100 uninterrupted steps.
#pragma once

#include <functional>
#include <vector>

#include "mlp.hpp"
#include "shardopt/sharded_optimizer.hpp"

namespace shardopt::testing {

struct ResumeSetup {
    examples::MlpShape shape;
    std::size_t samples = 96;
    OptimizerOptions optimizer = OptimizerOptions::defaults(OptimizerKind::adam);
    int accumulation = 1;
};

using OptimizerHook = std::function<void(ShardedOptimizer &)>;

ShardingOptions strategy_options(Strategy s);
// Hybrid: data_parallel_size dp, `inner` inside each data group.
ShardingOptions hybrid_options(int dp, Strategy inner, int hsdp_replicas = 1);

// The MLP's layout: one bucket (FSDP unit) per layer.
ParameterSet mlp_layout(const examples::MlpShape &shape, DType dtype);

// One optimizer step of the whole batch on this rank's slice (accumulation micro-steps included).
template <typename T>
void train_step(ShardedOptimizer &opt, const ResumeSetup &setup, const examples::Dataset &data);

// On `world` in-process ranks: create, before(opt) (e.g. load), `steps` steps, after(opt)
// (e.g. save); returns rank 0's packed parameters.
template <typename T>
std::vector<T> run_training(const ResumeSetup &setup, int world, const ShardingOptions &options, int steps,
                            const OptimizerHook &before = {}, const OptimizerHook &after = {});

} // namespace shardopt::testing

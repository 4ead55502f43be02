// Training drivers shared by the equivalence tests: the single-process reference (full batch,
// the base optimizer over whole tensors) and the same training through a ShardedOptimizer on
// in-process ranks, each rank computing the gradient of its slice of the batch.
#pragma once

#include <vector>

#include "mlp.hpp"
#include "shardopt/sharded_optimizer.hpp"

namespace shardopt::testing {

struct TrainingSetup {
    examples::MlpShape shape;
    std::size_t samples = 256;
    int steps = 200;
    OptimizerOptions optimizer = OptimizerOptions::defaults(OptimizerKind::adam);
    double max_grad_norm = 0.0;
    int accumulation = 1; // micro-batches per step (the batch is cut into this many)
};

template <typename T> std::vector<T> train_single_process(const TrainingSetup &setup);

// Runs `world_size` in-process ranks; returns rank 0's final packed parameters.
template <typename T>
std::vector<T> train_distributed(const TrainingSetup &setup, int world_size, const ShardingOptions &options);

// max |a-b| / max |b|
template <typename T> double relative_error(const std::vector<T> &a, const std::vector<T> &b);

} // namespace shardopt::testing

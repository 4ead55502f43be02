// optimize() (the loop's first form, kept for its C and C++ callers): its checks, the same for
// every optimizer (ShardedOptimizer runs them once), and the call as a train(): its options and
// result in train()'s terms. The one difference from before train(): with min_delta > 0 the best
// solution is the lowest loss, and min_delta decides only what counts as progress for patience.
#pragma once

#include "shardopt/sharded_optimizer.hpp"
#include "shardopt/training.hpp"

namespace shardopt::training {

// Throws Error(invalid_argument) naming the first argument out of range.
void check_optimize_options(const ModelFunction &model, const OptimizeOptions &options);

TrainingOptions training_options_of(const OptimizeOptions &o);
BatchFunction batch_function_of(const ModelFunction &model);
OptimizeResult optimize_result_of(TrainingResult &&r);

} // namespace shardopt::training

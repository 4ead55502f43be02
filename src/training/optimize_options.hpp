// optimize() (the loop's first form, kept for its C and C++ callers) as a train() call: its
// options and result in train()'s terms. The one difference: with min_delta > 0 the best solution
// is now the lowest loss, and min_delta decides only what counts as progress for patience.
#pragma once

#include "shardopt/sharded_optimizer.hpp"
#include "shardopt/training.hpp"

namespace shardopt::training {

TrainingOptions training_options_of(const OptimizeOptions &o);
BatchFunction batch_function_of(const ModelFunction &model);
OptimizeResult optimize_result_of(TrainingResult &&r);

} // namespace shardopt::training

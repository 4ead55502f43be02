// The checks of optimize()'s arguments, the same for every optimizer: ShardedOptimizer runs them
// once before its optimizer trains (and AsyncSgdOptimizer::optimize for its own callers).
#pragma once

#include "shardopt/sharded_optimizer.hpp"

namespace shardopt::training {

// Throws Error(invalid_argument) naming the first argument out of range.
void check_optimize_options(const ModelFunction &model, const OptimizeOptions &options);

} // namespace shardopt::training

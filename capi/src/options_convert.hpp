// C options structs -> C++ options (validated; messages name the bad field).
#pragma once

#include "shardopt.h"
#include "shardopt/optim.hpp"
#include "shardopt/sharded_optimizer.hpp"
#include "shardopt/training.hpp"

#include <functional>

namespace shardopt::capi {
OptimizerOptions optimizer_options_from(const shardopt_optimizer_options *user);
ShardingOptions sharding_options_from(const shardopt_sharding_options *user);
OptimizeOptions optimize_options_from(const shardopt_optimize_options *user);
// on_callback_failure(rc): what a non-zero return of a custom lr_fn does (it must throw).
// require_samples false: num_samples 0 (the set not given yet) passes.
TrainingOptions training_options_from(const shardopt_training_options *user,
                                      std::function<void(int rc)> on_callback_failure, bool require_samples = true);
} // namespace shardopt::capi

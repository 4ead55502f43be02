// C options structs -> C++ options (validated; messages name the bad field).
#pragma once

#include "shardopt.h"
#include "shardopt/optim.hpp"
#include "shardopt/sharded_optimizer.hpp"

namespace shardopt::capi {
OptimizerOptions optimizer_options_from(const shardopt_optimizer_options *user);
ShardingOptions sharding_options_from(const shardopt_sharding_options *user);
OptimizeOptions optimize_options_from(const shardopt_optimize_options *user);
} // namespace shardopt::capi

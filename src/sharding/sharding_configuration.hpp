// AiDotNet's ShardingConfiguration semantics, resolved once for every language: the parameter
// group size as the layout's buckets, the configuration's learning rate as the optimizer's, and
// AutoSyncGradients = false as Local SGD.
#pragma once

#include "shardopt/optim.hpp"
#include "shardopt/params.hpp"
#include "shardopt/sharded_optimizer.hpp"

namespace shardopt {

struct ResolvedConfiguration {
    ParameterSet layout;
    OptimizerOptions optimizer;
    ShardingOptions sharding;
};

// Throws Error(invalid_argument) naming the field for a bad value or an impossible combination.
ResolvedConfiguration resolve_configuration(ParameterSet layout, OptimizerOptions optimizer, ShardingOptions sharding);

} // namespace shardopt

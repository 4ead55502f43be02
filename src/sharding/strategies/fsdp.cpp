// FSDP (ZeRO-3): parameters, gradients and optimizer state sharded at rest. A unit (bucket) is
// allgathered when the model needs its parameters (gather/release, with the next unit
// prefetched), gradients are reduce-scattered as in ZeRO-2, and the update touches only the
// shard: nothing is gathered after it.
#include "strategy_plan.hpp"

namespace shardopt {

StrategyPlan fsdp_plan() {
    StrategyPlan plan;
    plan.params = Residency::shard;
    plan.grads = Residency::shard;
    plan.state = Residency::shard;
    plan.reduction = GradientReduction::reduce_scatter;
    return plan;
}

} // namespace shardopt

// ZeRO-2: optimizer state and gradients sharded. Each bucket's gradient is reduce-scattered from
// a bucket-sized staging buffer into this rank's gradient shard (the full gradient is never
// held), the rank updates its shard, and an allgather per bucket restores full parameters.
#include "strategy_plan.hpp"

namespace shardopt {

StrategyPlan zero2_plan() {
    StrategyPlan plan;
    plan.grads = Residency::shard;
    plan.state = Residency::shard;
    plan.reduction = GradientReduction::reduce_scatter;
    plan.after_update = AfterUpdate::allgather_params;
    return plan;
}

} // namespace shardopt

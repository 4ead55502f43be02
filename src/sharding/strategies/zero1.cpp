// ZeRO-1: optimizer state sharded. Gradients are still allreduced whole (each rank needs only its
// shard of them, but the full gradient is what the allreduce leaves); each rank updates its
// shard of the parameters, then an allgather per bucket gives everyone the full parameters.
#include "strategy_plan.hpp"

namespace shardopt {

StrategyPlan zero1_plan() {
    StrategyPlan plan;
    plan.state = Residency::shard;
    plan.reduction = GradientReduction::allreduce;
    plan.after_update = AfterUpdate::allgather_params;
    return plan;
}

} // namespace shardopt

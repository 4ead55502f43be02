// Asynchronous SGD: each rank keeps the full parameters (its view) and a full gradient, and the
// optimizer state of its own shard, which it updates as that shard's owner. Gradients travel to
// the owners point to point, not through a collective, so src/async runs this plan instead of
// the step engine; the plan describes what it holds, for the memory check and checkpoints (which
// read and write it as ZeRO-1's: full parameters, state by chunk).
#include "strategy_plan.hpp"

namespace shardopt {

StrategyPlan async_sgd_plan() {
    StrategyPlan plan;
    plan.state = Residency::shard;
    plan.reduction = GradientReduction::allreduce; // gradients are combined across ranks (by the owners)
    plan.after_update = AfterUpdate::nothing;
    return plan;
}

} // namespace shardopt

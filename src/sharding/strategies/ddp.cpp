// DDP: every rank holds everything and runs the whole update on the averaged gradient; the only
// communication is one allreduce per bucket, issued as soon as the bucket's gradient is ready
// so it overlaps the backward pass of the buckets after it.
#include "strategy_plan.hpp"

namespace shardopt {

StrategyPlan ddp_plan() {
    StrategyPlan plan;
    plan.reduction = GradientReduction::allreduce;
    return plan;
}

} // namespace shardopt

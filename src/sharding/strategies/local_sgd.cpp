// Local SGD: every rank steps on its own gradient with no communication, and the parameters are
// averaged over the group every `period` updates (optimizer state stays local).
#include "strategy_plan.hpp"

namespace shardopt {

StrategyPlan local_sgd_plan(int period) {
    StrategyPlan plan;
    plan.reduction = GradientReduction::none;
    plan.after_update = AfterUpdate::average_params;
    plan.average_every = period;
    return plan;
}

} // namespace shardopt

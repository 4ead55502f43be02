// Where a strategy keeps its parts across the ranks, as the checkpoint operations see it
// (src/checkpoint's Placement): from its plan and process grid.
#pragma once

#include "../checkpoint/checkpoint_target.hpp"
#include "hybrid_grid.hpp"
#include "strategies/strategy_plan.hpp"

namespace shardopt {

checkpoint::Placement placement_of(const StrategyPlan &plan, const HybridGrid &grid);

} // namespace shardopt

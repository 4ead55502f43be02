// What every part of the step engine reads: the space, the layout, the strategy's plan and grid,
// the options and the offload plan, fixed once the engine is built (step_engine.hpp owns them).
#pragma once

#include <cstddef>
#include <vector>

#include "../../params/owned_segments.hpp"
#include "../hybrid_grid.hpp"
#include "../offload/offload_plan.hpp"
#include "../strategies/strategy_plan.hpp"
#include "host_comms.hpp"
#include "space.hpp"

namespace shardopt::engine {

struct EngineContext {
    Space &space;
    const ParameterSet &layout; // planned for the shard group
    const StrategyPlan &plan;
    const HybridGrid &grid;
    const ShardingOptions &options;
    const OptimizerOptions &optimizer; // lr: the current learning rate
    const OffloadPlan &offload;
    // Chunk group_rank() of every bucket (what the rank owns where state is sharded, and what the
    // norm sums on every strategy that reduces gradients).
    const std::vector<OwnedSegment> &chunks;
    HostComms &host_comms;

    DType dtype() const noexcept { return layout.dtype(); }
    std::size_t elem() const noexcept { return layout.element_size(); }
    // This rank in the group its buckets are reduced and sharded over (HSDP: the shard group).
    int group_rank() const noexcept { return grid.shard->rank(); }
    int group_size() const noexcept { return grid.shard->size(); }
};

} // namespace shardopt::engine

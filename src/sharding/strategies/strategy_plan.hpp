// StrategyPlan: what a strategy keeps on each rank, which collective reduces each bucket's
// gradient, and what happens after the update. The engine (../engine/step_engine.hpp) runs any
// plan; each strategy's own file here (ddp.cpp, zero1.cpp, zero2.cpp, fsdp.cpp, local_sgd.cpp,
// async_sgd.cpp) says what its plan is and why. Hybrid is a grid (../hybrid_grid.hpp) with one of the four
// data-parallel plans inside each data group.
#pragma once

#include "shardopt/sharded_optimizer.hpp"

namespace shardopt {

// Held on every rank whole (the full padded flat buffer), or only this rank's shard of each
// bucket (ParameterSet::shard_count elements).
enum class Residency { full, shard };

// The collective over the data group that each bucket's gradient takes once it is ready.
enum class GradientReduction {
    none,           // every rank steps on its own gradient (LocalSGD)
    allreduce,      // every rank gets the whole averaged bucket
    reduce_scatter, // every rank gets only its averaged shard of the bucket
};

// What follows the update.
enum class AfterUpdate {
    nothing,
    allgather_params, // each rank updated its shard of full parameters: gather the others'
    average_params,   // every average_every-th update, parameters averaged over the group
};

struct StrategyPlan {
    Residency params = Residency::full;
    Residency grads = Residency::full;
    Residency state = Residency::full; // optimizer state, and so the part of the update run here
    GradientReduction reduction = GradientReduction::allreduce;
    AfterUpdate after_update = AfterUpdate::nothing;
    int average_every = 0; // AfterUpdate::average_params: the period in updates

    bool params_sharded() const noexcept { return params == Residency::shard; }
    bool grads_sharded() const noexcept { return grads == Residency::shard; }
    bool state_sharded() const noexcept { return state == Residency::shard; }
    bool reduce_grads() const noexcept { return reduction != GradientReduction::none; }
    bool gather_after_step() const noexcept { return after_update == AfterUpdate::allgather_params; }
};

// Each strategy's plan (one file each).
StrategyPlan ddp_plan();
StrategyPlan zero1_plan();
StrategyPlan zero2_plan();
StrategyPlan fsdp_plan();
StrategyPlan local_sgd_plan(int period);
// What an asynchronous SGD rank holds (src/async runs it, not the step engine).
StrategyPlan async_sgd_plan();

// The largest ShardingOptions::async_staleness accepted.
inline constexpr int kMaxAsyncStaleness = 1 << 20;

// The plan of the strategy run inside each data group (options.hybrid_data_strategy for hybrid).
StrategyPlan plan_of(const ShardingOptions &options);

} // namespace shardopt

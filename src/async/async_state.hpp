// What an AsyncSgdOptimizer holds on its rank, shared by the files of src/async.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "../params/aligned_buffer.hpp"
#include "../sharding/engine/space.hpp"
#include "../sharding/hybrid_grid.hpp"
#include "../sharding/strategies/strategy_plan.hpp"
#include "../training/trainee.hpp"
#include "channels.hpp"
#include "shard_owner.hpp"
#include "shardopt/async_sgd.hpp"

namespace shardopt {

struct AsyncSgdOptimizer::State {
    CommunicatorPtr world;
    ParameterSet layout; // planned for the world
    OptimizerOptions optimizer;
    ShardingOptions sharding; // strategy async_sgd, async_staleness
    StrategyPlan plan;        // async_sgd_plan(): what checkpoints read and write
    HybridGrid grid;          // flat over the world (for checkpoints)
    std::unique_ptr<engine::Space> space;
    std::unique_ptr<async::ShardOwner> owner;
    std::unique_ptr<async::Channels> channels;
    AlignedBuffer view;     // the worker's full padded parameters
    AlignedBuffer gradient; // the worker's full padded gradient (padding stays 0)
    std::int64_t step_count = 0;
    AsyncSgdStats stats;

    int rank() const noexcept { return world->rank(); }
    int size() const noexcept { return world->size(); }
    int staleness() const noexcept { return sharding.async_staleness; }
    std::size_t elem() const noexcept { return layout.element_size(); }
    // The view's packed parameters (every tensor in order).
    void view_to_packed(void *packed) const;
    // Packed parameters into the view (padding 0) and this rank's master shard.
    void set_from_packed(const void *packed);
    // The master shard from the view (after the view was written whole).
    void master_from_view();
    // The learning rate from now on (checked by the caller).
    void set_lr(double lr);
    // True on every rank when any rank votes to stop (collective over the world).
    bool early_stop_vote(bool local_vote);
    // `value` reduced over the world (every rank gets the result).
    double allreduce_over_world(double value, ReduceOp op);
    // An epoch of train() as one asynchronous session (async_optimize.cpp).
    training::EpochOutcome run_epoch(const training::EpochPlan &plan);
};

} // namespace shardopt

// HybridGrid: the data x tensor x pipeline process grid, built with split on the world.
// Rank order follows the usual convention: tensor-parallel ranks are adjacent (same host),
// then data-parallel, then pipeline stages:  rank = (pp * dp_size + dp) * tp_size + tp.
#pragma once

#include "shardopt/comm.hpp"
#include "shardopt/sharded_optimizer.hpp"

namespace shardopt {

struct HybridGrid {
    int pp_size = 1, tp_size = 1, dp_size = 1;
    int pp_rank = 0, tp_rank = 0, dp_rank = 0;
    CommunicatorPtr world; // every rank
    CommunicatorPtr data;  // same (pp, tp): where gradients are reduced and state is sharded
    CommunicatorPtr tensor;   // same (pp, dp): averages tp-replicated gradients
    CommunicatorPtr pipeline; // same (tp, dp): activations between stages (the caller's)
    // HSDP: `data` split into `replicas` shard groups; shard (inside a group) and replica
    // (same position across groups) communicators. replica is null when replicas == 1.
    CommunicatorPtr shard;
    CommunicatorPtr replica;
    int replica_rank = 0;

    // Collective over world. data_parallel_size -1 takes the rest of the world.
    static HybridGrid build(CommunicatorPtr world, int pipeline_parallel_size, int tensor_parallel_size,
                            int data_parallel_size, int replicas);
    // The trivial grid for non-hybrid strategies: data = shard = world.
    static HybridGrid flat(CommunicatorPtr world);
    // The grid `options` asks for: build() for the hybrid strategy, flat() for the others.
    static HybridGrid for_options(CommunicatorPtr world, const ShardingOptions &options);
};

// Where world rank `rank` of `world_size` sits in a pp x tp x dp grid with `replicas` HSDP
// shard groups in each data group: the arithmetic HybridGrid::build splits by (the memory plan
// and the planner use it without communicators). Throws Error(invalid_argument) for a grid that
// does not fit the world, as build() does.
struct GridPlace {
    int pp_size = 1, tp_size = 1, dp_size = 1;
    int pp_rank = 0, tp_rank = 0, dp_rank = 0;
    int shard_size = 1, shard_rank = 0, replica_rank = 0; // HSDP: the shard group inside the data group
};
GridPlace grid_place(int world_size, int rank, int pp, int tp, int dp, int replicas);
// The grid `options` asks for (the flat one unless hybrid).
GridPlace grid_place(const ShardingOptions &options, int world_size, int rank);

// The strategy inside each data-parallel group (the hybrid's hybrid_data_strategy).
inline Strategy data_strategy_of(const ShardingOptions &options) {
    return options.strategy == Strategy::hybrid ? options.hybrid_data_strategy : options.strategy;
}

} // namespace shardopt

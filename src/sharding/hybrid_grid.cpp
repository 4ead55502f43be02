#include "hybrid_grid.hpp"

#include "shardopt/error.hpp"

namespace shardopt {

HybridGrid HybridGrid::flat(CommunicatorPtr world) {
    HybridGrid g;
    g.dp_size = world->size();
    g.dp_rank = world->rank();
    g.world = g.data = g.shard = world;
    return g;
}

GridPlace grid_place(int world_size, int rank, int pp, int tp, int dp, int replicas) {
    const int n = world_size;
    require(pp >= 1 && tp >= 1, ErrorCode::invalid_argument,
            "pipeline_parallel_size and tensor_parallel_size must be >= 1");
    require(n % (pp * tp) == 0, ErrorCode::invalid_argument,
            "world size " + std::to_string(n) + " is not divisible by pipeline x tensor parallel size " +
                std::to_string(pp * tp));
    if (dp == -1) dp = n / (pp * tp);
    require(dp >= 1 && pp * tp * dp == n, ErrorCode::invalid_argument,
            "pipeline x tensor x data parallel sizes " + std::to_string(pp) + "x" + std::to_string(tp) + "x" +
                std::to_string(dp) + " do not multiply to the world size " + std::to_string(n));
    require(replicas >= 1 && dp % replicas == 0, ErrorCode::invalid_argument,
            "hsdp_replicas " + std::to_string(replicas) + " must divide the data parallel size " + std::to_string(dp));
    GridPlace g;
    g.pp_size = pp;
    g.tp_size = tp;
    g.dp_size = dp;
    g.tp_rank = rank % tp;
    g.dp_rank = (rank / tp) % dp;
    g.pp_rank = rank / (tp * dp);
    g.shard_size = dp / replicas;
    g.replica_rank = g.dp_rank / g.shard_size;
    g.shard_rank = g.dp_rank % g.shard_size;
    return g;
}

GridPlace grid_place(const ShardingOptions &options, int world_size, int rank) {
    if (options.strategy != Strategy::hybrid) return grid_place(world_size, rank, 1, 1, world_size, 1);
    return grid_place(world_size, rank, options.pipeline_parallel_size, options.tensor_parallel_size,
                      options.data_parallel_size, options.hsdp_replicas);
}

HybridGrid HybridGrid::build(CommunicatorPtr world, int pp, int tp, int dp, int replicas) {
    const GridPlace p = grid_place(world->size(), world->rank(), pp, tp, dp, replicas);
    HybridGrid g;
    g.pp_size = p.pp_size;
    g.tp_size = tp = p.tp_size;
    g.dp_size = dp = p.dp_size;
    g.tp_rank = p.tp_rank;
    g.dp_rank = p.dp_rank;
    g.pp_rank = p.pp_rank;
    g.world = world;
    g.data = world->split(g.pp_rank * tp + g.tp_rank, g.dp_rank);
    g.tensor = world->split(g.pp_rank * dp + g.dp_rank, g.tp_rank);
    g.pipeline = world->split(g.dp_rank * tp + g.tp_rank, g.pp_rank);
    if (replicas == 1) {
        g.shard = g.data;
    } else {
        g.replica_rank = p.replica_rank;
        g.shard = g.data->split(g.replica_rank, g.dp_rank);
        g.replica = g.data->split(g.dp_rank % p.shard_size, g.dp_rank);
    }
    return g;
}

HybridGrid HybridGrid::for_options(CommunicatorPtr world, const ShardingOptions &options) {
    if (options.strategy != Strategy::hybrid) return flat(std::move(world));
    return build(std::move(world), options.pipeline_parallel_size, options.tensor_parallel_size,
                 options.data_parallel_size, options.hsdp_replicas);
}

} // namespace shardopt

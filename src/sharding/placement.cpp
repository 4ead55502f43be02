#include "placement.hpp"

namespace shardopt {

checkpoint::Placement placement_of(const StrategyPlan &plan, const HybridGrid &grid) {
    checkpoint::Placement p;
    p.params_sharded = plan.params_sharded();
    p.state_sharded = plan.state_sharded();
    p.by_chunk = plan.reduce_grads(); // LocalSGD's replicas differ: each rank holds its own, whole
    p.replica_copy = grid.replica != nullptr && grid.replica_rank != 0;
    p.pp_size = grid.pp_size;
    p.tp_size = grid.tp_size;
    p.dp_size = grid.dp_size;
    p.pp_rank = grid.pp_rank;
    return p;
}

} // namespace shardopt

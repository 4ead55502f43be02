// The planner's memory figures: the library's memory plan (../sharding/memory_plan.hpp), the one
// computation the optimizers' up-front fit checks use, for any rank of any job.
#include "memory_model.hpp"

#include "../sharding/memory_plan.hpp"

namespace shardopt::planner {

MemoryStats rank_memory(const ParameterSet &layout, const OptimizerOptions &optimizer, const ShardingOptions &options,
                        int world_size, int rank, const std::vector<int> &host_of_ranks, bool external_params,
                        int device_space) {
    return MemoryPlan::for_rank(layout, optimizer, options, world_size, rank, host_of_ranks, external_params,
                                device_space)
        .stats;
}

std::uint64_t space_bytes(const MemoryStats &m) { return m.total(); }

} // namespace shardopt::planner

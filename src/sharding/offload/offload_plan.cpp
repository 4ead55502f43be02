#include "offload_plan.hpp"

#include <algorithm>
#include <string>

#include "../hybrid_grid.hpp"
#include "../strategies/strategy_plan.hpp"
#include "shardopt/error.hpp"

namespace shardopt {

void validate_offload_options(const ShardingOptions &o) {
    if (o.memory != MemorySpace::cuda) return; // host memory: accepted, and nothing to move
    require(!o.cpu_offload_gradients || o.cpu_offload_optimizer, ErrorCode::invalid_argument,
            "cpu_offload_gradients needs cpu_offload_optimizer: gradients kept in host memory are read by the CPU "
            "update only");
    require(!o.cpu_offload_params || o.cpu_offload_optimizer, ErrorCode::invalid_argument,
            "cpu_offload_params needs cpu_offload_optimizer: the parameter shard kept in host memory is updated by "
            "the CPU");
    if (!o.cpu_offload_optimizer) return;
    const Strategy data = data_strategy_of(o);
    require(data != Strategy::local_sgd, ErrorCode::invalid_argument,
            "cpu_offload_optimizer: local_sgd averages its parameters on the device and has no reduction to overlap "
            "the copies with; use ddp, zero1, zero2 or fsdp");
    require(o.strategy != Strategy::hybrid || o.hsdp_replicas == 1, ErrorCode::invalid_argument,
            "cpu_offload_optimizer: hsdp_replicas > 1 averages the gradient shards across replicas after every "
            "reduction; offload is for ddp, zero1, zero2 and fsdp (and hybrid without replicas)");
    require(!o.cpu_offload_params || data == Strategy::fsdp, ErrorCode::invalid_argument,
            std::string("cpu_offload_params needs parameters sharded at rest (fsdp, or hybrid with fsdp inside); ") +
                strategy_name(data) + " keeps full parameters on every rank, which its kernels read in place");
}

OffloadPlan OffloadPlan::of(const ShardingOptions &options, bool space_offloads) {
    OffloadPlan plan;
    if (!space_offloads || !options.cpu_offload_optimizer) return plan;
    ShardingOptions as_device = options;
    as_device.memory = MemorySpace::cuda; // a space that offloads holds device memory
    validate_offload_options(as_device);
    plan.optimizer = true;
    plan.gradients = options.cpu_offload_gradients;
    plan.params = options.cpu_offload_params;
    return plan;
}

OwnedRegion owned_region(const StrategyPlan &plan, const ParameterSet &layout, int b) {
    const BucketLayout &bl = layout.bucket(b);
    if (plan.state_sharded()) return {bl.shard_offset, bl.shard};
    return {bl.offset, bl.padded};
}

std::size_t owned_region_elements(const StrategyPlan &plan, const ParameterSet &layout) {
    return plan.state_sharded() ? layout.shard_count() : layout.padded_count();
}

std::size_t staging_buffer_bytes(const OffloadPlan &offload, const StrategyPlan &plan, const ParameterSet &layout) {
    std::size_t elements = layout.max_bucket_padded();
    if (offload.gradients && plan.grads_sharded()) { // and the reduce-scatter's output, copied out from there
        std::size_t max_shard = 0;
        for (const BucketLayout &bl : layout.buckets()) max_shard = std::max(max_shard, bl.shard);
        elements += max_shard;
    }
    return elements * layout.element_size();
}

OffloadResidency OffloadResidency::of(const OffloadPlan &offload, const StrategyPlan &plan, const ParameterSet &layout,
                                      std::size_t owned, int state_slots) {
    const std::size_t elem = layout.element_size(), full = layout.padded_count() * elem,
                      shard = layout.shard_count() * elem;
    OffloadResidency r;
    r.device_params = offload.params ? 0 : (plan.params_sharded() ? shard : full);
    r.device_grads = offload.gradients ? 0 : (plan.grads_sharded() ? shard : full);
    r.device_state = offload.optimizer ? 0 : owned * elem * std::size_t(state_slots);
    if (plan.grads_sharded() || offload.gradients) r.device_staging_each = staging_buffer_bytes(offload, plan, layout);
    if (!offload.optimizer) return r;
    r.host_params = offload.params ? shard : 0;
    r.host_grads = owned_region_elements(plan, layout) * elem;
    r.host_master = offload.params ? 0 : owned_region_elements(plan, layout) * elem;
    r.host_state = owned * elem * std::size_t(state_slots);
    return r;
}

} // namespace shardopt

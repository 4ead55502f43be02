// OffloadPlan: which parts of a device optimizer ZeRO-Offload keeps in host memory
// (ShardingOptions::cpu_offload_*), checked against the strategy, and how many bytes each rank
// then holds on each side. The when of every copy is OffloadSchedule's (offload_schedule.hpp).
#pragma once

#include <cstddef>

#include "shardopt/params.hpp"
#include "shardopt/sharded_optimizer.hpp"

namespace shardopt {

struct StrategyPlan;

struct OffloadPlan {
    bool optimizer = false; // state and fp32 master weights on the host; the update on the CPU
    bool gradients = false; // reduced gradients kept on the host only (the device stages them)
    bool params = false;    // FSDP's parameter shard at rest on the host (it is the master copy)

    bool active() const noexcept { return optimizer; }

    // The plan for `options` in a space that can offload (`space_offloads`); a space that cannot
    // (host memory) gets none: there the flags mean nothing. Throws Error(invalid_argument) as
    // validate_offload_options.
    static OffloadPlan of(const ShardingOptions &options, bool space_offloads);
};

// Error(invalid_argument) naming the flag when a set flag's requirement is not met: gradients
// and params need cpu_offload_optimizer, params an fsdp data strategy; none with local_sgd or
// hsdp_replicas > 1. Any combination is accepted when options.memory is host.
void validate_offload_options(const ShardingOptions &options);

// What one rank holds with ZeRO-Offload, in bytes of the layout's element type: the device
// buffers that remain at rest, and the host side. `owned` is the number of elements this rank
// updates (its owned segments, without padding); state_slots those of the optimizer.
struct OffloadResidency {
    std::size_t device_params = 0, device_grads = 0, device_state = 0;
    // Gradient staging buffers per staging buffer (bucket input, and the reduce-scatter output
    // when gradients are offloaded and sharded).
    std::size_t device_staging_each = 0;
    std::size_t host_params = 0;  // the parameter shard at rest (cpu_offload_params)
    std::size_t host_grads = 0;   // the owned region of every bucket's reduced gradient (pinned)
    std::size_t host_master = 0;  // fp32 master weights of the owned region (pinned); 0 when
                                  // host_params is the master
    std::size_t host_state = 0;   // optimizer state of the owned elements

    static OffloadResidency of(const OffloadPlan &offload, const StrategyPlan &plan, const ParameterSet &layout,
                               std::size_t owned, int state_slots);
};

// One gradient staging buffer (ZeRO-2, FSDP, offloaded gradients): a bucket, and with gradients
// offloaded and sharded the reduce-scatter's output beside it (GradientBuckets' and the memory
// plan's size of it).
std::size_t staging_buffer_bytes(const OffloadPlan &offload, const StrategyPlan &plan, const ParameterSet &layout);

// The elements of the owned region of bucket `b` as ZeRO-Offload copies it, one contiguous run
// on each side: the whole padded bucket when state is not sharded (DDP), else the rank's chunk.
// `host_offset`: where it starts in the host buffers (laid out as the full padded buffer, or as
// the rank's shard buffer).
struct OwnedRegion {
    std::size_t host_offset = 0;
    std::size_t count = 0;
};
OwnedRegion owned_region(const StrategyPlan &plan, const ParameterSet &layout, int b);
// Elements of the host buffers that hold every bucket's owned region.
std::size_t owned_region_elements(const StrategyPlan &plan, const ParameterSet &layout);

} // namespace shardopt

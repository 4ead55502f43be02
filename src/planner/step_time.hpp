// The time of one training step of one rank, simulated as the step engine schedules it: the
// forward (FSDP: each unit gathered before use, the next one prefetched), the backward with each
// bucket's reduction issued as soon as the bucket is ready and queued behind the ones before it on
// the shard group's communicator (one collective at a time, in issue order), a bucket waiting for
// a free staging buffer where gradients are staged (ZeRO-2, FSDP), the update bucket by bucket
// with ZeRO's allgather of bucket b running while b + 1 is updated, and, for pipeline stages, the
// schedule's actions on every stage with the activations between them.
#pragma once

#include <vector>

#include "collective_time.hpp"
#include "shardopt/planner.hpp"
#include "sharding/strategies/strategy_plan.hpp"

namespace shardopt::planner {

struct StepModel {
    const Cluster *cluster = nullptr;
    const ParameterSet *layout = nullptr; // this rank's, planned for its shard group
    ShardingOptions options;
    StrategyPlan plan;
    bool offload = false; // ZeRO-Offload: the update on the CPU, gradients and parameters over PCIe
    Group shard, replica, world, tensor;
    std::size_t owned = 0; // elements this rank updates
    int state_slots = 0;
    double forward = 0.0, backward = 0.0; // this rank's compute per step (every micro-step)
    // Pipeline stages (pp > 1): the schedule, and the link and bytes between adjacent stages.
    PipelineShape pipeline;
    Link stage_link;
    double activation_bytes = 0.0;
    // Tensor parallelism: collectives per micro-batch in forward and backward, and their bytes.
    int tensor_collectives = 0;
    double tensor_bytes = 0.0;
    double micro_batches = 1.0; // per data-parallel rank and step
};

struct StepTime {
    TimeBreakdown time;
    Cost sent; // per rank and step
};

StepTime simulate_step(const StepModel &model);

} // namespace shardopt::planner

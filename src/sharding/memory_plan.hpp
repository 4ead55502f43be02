// MemoryPlan: the bytes one rank of an optimizer holds, by kind, computed from its options and
// layout before anything is allocated. It is the one computation of them: the step engine's and
// asynchronous SGD's up-front fit checks use it, so does the planner (src/planner), and it equals
// what memory_stats() reports once the optimizer has run a step of the protocol (every bucket
// reduced, FSDP units gathered and released one after another). tests/planner walks every
// configuration of the equivalence suite, on every rank, to keep it so. The engine's parts size
// their buffers with the same pieces (OffloadResidency and staging_buffer_bytes in offload/, the
// compressed reducers' *_bytes).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "offload/offload_plan.hpp"
#include "shardopt/comm.hpp"
#include "shardopt/params.hpp"
#include "shardopt/sharded_optimizer.hpp"
#include "strategies/strategy_plan.hpp"

namespace shardopt {

// What decides a rank's bytes (the step engine's strategies; async_sgd: MemoryPlan::async_sgd).
struct MemoryPlanInputs {
    const ParameterSet *layout = nullptr; // planned for the shard group (ParameterSet::world_size)
    StrategyPlan plan;
    OffloadPlan offload;      // none in host memory (the flags mean nothing there)
    ShardingOptions options;  // accumulation, staging buffers, FSDP prefetch, compression
    int shard_rank = 0;       // this rank in the shard group
    int state_slots = 0;      // the base optimizer's (Optimizer::state_slots)
    bool external_params = false; // the caller's own parameter buffer
    // Gradient compression: the shard group's hosts (Communicator::host_of_ranks) and whether the
    // ranks allow the hierarchy (compression::hierarchy_allowed_here).
    std::vector<int> host_of_ranks;
    bool hierarchy_allowed = true;
};

struct MemoryPlan {
    // As memory_stats() reports it once a step has run (peak_buffer_bytes = buffer_bytes).
    MemoryStats stats;
    // Of stats.params_bytes, the caller's own buffer (external parameters): not the optimizer's to
    // allocate.
    std::size_t caller_bytes = 0;

    // What the optimizer allocates in its memory space, and in host memory besides (ZeRO-Offload).
    std::size_t space_bytes() const noexcept { return stats.total() - caller_bytes; }
    std::size_t host_bytes() const noexcept { return stats.host_total(); }

    static MemoryPlan of(const MemoryPlanInputs &in);
    // World rank `rank` of a job of `world_size` ranks, from what ShardedOptimizer::create is
    // given, resolved and checked as create() resolves and checks it (sharding configuration,
    // options, hybrid grid; without the options' agreement across ranks). host_of_ranks: the
    // world's hosts (Communicator::host_of_ranks; empty: one host). device_space: the memory is a
    // device's whose space offloads (cuda memory; a test's emulated device); default: options.memory.
    static MemoryPlan for_rank(ParameterSet layout, const OptimizerOptions &optimizer, const ShardingOptions &options,
                               int world_size, int rank, const std::vector<int> &host_of_ranks = {},
                               bool external_params = false, int device_space = -1);
    // An asynchronous SGD rank (src/async): the view, the master shard, the gradient, the state of
    // its chunks and a session's message buffers.
    static MemoryPlan async_sgd(const ParameterSet &layout, int rank, int state_slots);
};

// The pieces the engine sizes its buffers with.
// Elements whose optimizer state this rank keeps: its chunk of every bucket (state sharded), or
// every tensor whole. Padding is never updated, so it has no state.
std::size_t owned_state_elements(const StrategyPlan &plan, const ParameterSet &layout, int shard_rank);
// FSDP: the unit buffers held at once in the step protocol (the unit in use and the prefetched one).
int fsdp_live_units(const ShardingOptions &options);
// asynchronous SGD: a session's message buffers (a gradient out and one in, a version out and
// one in per owner, and the owner's sum), for a shard of shard_bytes on `world` ranks.
std::size_t async_sgd_message_bytes(std::size_t shard_bytes, int world);
// Header sizes of asynchronous SGD's messages (src/async/wire.hpp asserts them).
inline constexpr std::size_t kAsyncGradientHeaderBytes = 32, kAsyncReplyHeaderBytes = 48;

// Ranks of this job sharing this host's memory: the whole group for the in-process backend,
// else the launcher's local world size (LOCAL_WORLD_SIZE, SHARDOPT_LOCAL_WORLD_SIZE,
// OMPI_COMM_WORLD_LOCAL_SIZE, SLURM_NTASKS_PER_NODE), else 1.
int ranks_sharing_memory(const Communicator &comm);

// Bytes this process may still allocate: MemAvailable, capped by a cgroup limit; 0 if unknown.
std::size_t available_memory_bytes();

// Which side of a plan require_fits checks: what the optimizer allocates in host memory as its
// space, or ZeRO-Offload's host side of a device optimizer.
enum class HostSide { space, offload };

// Throws Error(out_of_memory) with the plan's figures when the bytes it puts in host memory per
// rank, times the ranks on this host, exceed what is available.
void require_fits(const MemoryPlan &need, HostSide side, int ranks_here, Strategy strategy, std::size_t parameters,
                  const char *optimizer);

} // namespace shardopt

// MemoryPlan: what a strategy will hold on each rank, computed before anything is allocated, so
// a model that cannot fit is refused up front with an estimate instead of dying midway.
#pragma once

#include <cstddef>
#include <string>

#include "shardopt/comm.hpp"
#include "shardopt/params.hpp"
#include "shardopt/sharded_optimizer.hpp"

namespace shardopt {

struct StrategyPlan;

struct MemoryPlan {
    std::size_t params = 0, grads = 0, state = 0, buffers = 0;
    std::size_t total() const { return params + grads + state + buffers; }

    static MemoryPlan of(const StrategyPlan &plan, const ParameterSet &layout, int state_slots,
                         const ShardingOptions &options, bool external_params);
};

// Ranks of this job sharing this host's memory: the whole group for the in-process backend,
// else the launcher's local world size (LOCAL_WORLD_SIZE, SHARDOPT_LOCAL_WORLD_SIZE,
// OMPI_COMM_WORLD_LOCAL_SIZE, SLURM_NTASKS_PER_NODE), else 1.
int ranks_sharing_memory(const Communicator &comm);

// Bytes this process may still allocate: MemAvailable, capped by a cgroup limit; 0 if unknown.
std::size_t available_memory_bytes();

// Throws Error(out_of_memory) with the estimate when `need` bytes per rank times the ranks on
// this host exceed what is available.
void require_fits(const MemoryPlan &need, int ranks_here, Strategy strategy, std::size_t parameters,
                  const char *optimizer);

} // namespace shardopt

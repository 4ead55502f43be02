#include "memory_plan.hpp"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "shardopt/error.hpp"
#include "strategies/strategy_plan.hpp"

namespace shardopt {

MemoryPlan MemoryPlan::of(const StrategyPlan &plan, const ParameterSet &layout, int state_slots,
                          const ShardingOptions &options, bool external_params) {
    const std::size_t elem = layout.element_size(), full = layout.padded_count() * elem,
                      shard = layout.shard_count() * elem, bucket = layout.max_bucket_padded() * elem;
    MemoryPlan m;
    m.params = external_params ? 0 : (plan.params_sharded() ? shard : full);
    m.grads = plan.grads_sharded() ? shard : full;
    m.state = std::size_t(state_slots) * (plan.state_sharded() ? shard : full);
    if (options.gradient_accumulation_steps > 1) m.buffers += full;
    if (plan.grads_sharded()) m.buffers += std::size_t(options.staging_buffers) * bucket;
    if (plan.params_sharded()) m.buffers += (options.fsdp_prefetch ? 2 : 1) * bucket;
    return m;
}

int ranks_sharing_memory(const Communicator &comm) {
    if (comm.backend_name() == "inprocess") return comm.size();
    for (const char *name : {"SHARDOPT_LOCAL_WORLD_SIZE", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE",
                             "SLURM_NTASKS_PER_NODE"})
        if (const char *v = std::getenv(name)) {
            const int n = std::atoi(v);
            if (n > 0) return n;
        }
    return 1;
}

std::size_t available_memory_bytes() {
    std::size_t available = 0;
    std::ifstream meminfo("/proc/meminfo");
    for (std::string line; std::getline(meminfo, line);)
        if (line.rfind("MemAvailable:", 0) == 0) {
            std::istringstream in(line.substr(13));
            std::size_t kib = 0;
            in >> kib;
            available = kib * 1024;
        }
    // A container's cgroup v2 limit can be far below the host's free memory.
    std::ifstream limit_file("/sys/fs/cgroup/memory.max"), usage_file("/sys/fs/cgroup/memory.current");
    std::string limit;
    std::size_t usage = 0;
    if (limit_file >> limit && limit != "max" && usage_file >> usage) {
        const std::size_t cap = std::strtoull(limit.c_str(), nullptr, 10);
        if (cap > usage && (available == 0 || cap - usage < available)) available = cap - usage;
    }
    return available;
}

static std::string gigabytes(std::size_t bytes) {
    char text[32];
    std::snprintf(text, sizeof text, "%.2f GB", double(bytes) / 1e9);
    return text;
}

void require_fits(const MemoryPlan &need, int ranks_here, Strategy strategy, std::size_t parameters,
                  const char *optimizer) {
    const std::size_t available = available_memory_bytes();
    if (available == 0) return; // unknown: nothing to compare against
    const std::size_t total = need.total() * std::size_t(ranks_here);
    if (total <= available) return;
    throw Error(ErrorCode::out_of_memory,
                std::string(strategy_name(strategy)) + " with " + optimizer + " over " + std::to_string(parameters) +
                    " parameters needs " + gigabytes(need.total()) + " per rank (parameters " + gigabytes(need.params) +
                    ", gradients " + gigabytes(need.grads) + ", optimizer state " + gigabytes(need.state) +
                    ", buffers " + gigabytes(need.buffers) + ") x " + std::to_string(ranks_here) +
                    " ranks on this host = " + gigabytes(total) + ", but only " + gigabytes(available) +
                    " is available; shard further (zero2, fsdp) or use more hosts");
}

} // namespace shardopt

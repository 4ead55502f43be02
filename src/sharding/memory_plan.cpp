#include "memory_plan.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "../params/owned_segments.hpp"
#include "compression/compressed_reducer.hpp"
#include "hybrid_grid.hpp"
#include "sharding_configuration.hpp"
#include "shardopt/error.hpp"

namespace shardopt {

std::size_t owned_state_elements(const StrategyPlan &plan, const ParameterSet &layout, int shard_rank) {
    if (!plan.state_sharded()) return layout.element_count();
    std::size_t owned = 0;
    for (const OwnedSegment &s : owned_chunks(layout, shard_rank)) owned += s.count;
    return owned;
}

int fsdp_live_units(const ShardingOptions &options) { return options.fsdp_prefetch ? 2 : 1; }

MemoryPlan MemoryPlan::of(const MemoryPlanInputs &in) {
    require(in.layout != nullptr && in.layout->planned(), ErrorCode::internal, "MemoryPlan: the layout is not planned");
    const ParameterSet &layout = *in.layout;
    const StrategyPlan &plan = in.plan;
    const ShardingOptions &o = in.options;
    const std::size_t elem = layout.element_size(), full = layout.padded_count() * elem,
                      owned = owned_state_elements(plan, layout, in.shard_rank);
    const std::size_t buckets = std::size_t(layout.bucket_count());
    MemoryPlan m;
    MemoryStats &s = m.stats;
    // Where parameters, gradients and state rest: ZeRO-Offload's residency says it (in host memory,
    // where nothing is offloaded, it is the device side alone).
    const OffloadResidency r = OffloadResidency::of(in.offload, plan, layout, owned, in.state_slots);
    s.params_bytes = in.external_params ? full : r.device_params;
    m.caller_bytes = in.external_params ? full : 0;
    s.host_params_bytes = r.host_params;
    s.grads_bytes = r.device_grads;
    s.host_grads_bytes = r.host_grads;
    s.optimizer_state_bytes = r.device_state;
    s.host_optimizer_state_bytes = r.host_state + r.host_master;
    // Buffers: accumulation, the staging buffers the buckets took (each bucket takes a free one
    // until there are staging_buffers), FSDP's gathered units (with their spares).
    if (o.gradient_accumulation_steps > 1) s.buffer_bytes += full;
    s.buffer_bytes += std::min(buckets, std::size_t(std::max(1, o.staging_buffers))) * r.device_staging_each;
    if (plan.params_sharded())
        s.buffer_bytes += std::min(buckets, std::size_t(fsdp_live_units(o))) * layout.max_bucket_padded() * elem;
    s.peak_buffer_bytes = s.buffer_bytes;
    if (o.compression.enabled()) {
        const auto mode = plan.grads_sharded() ? compression::ReduceMode::reduce_scatter : compression::ReduceMode::allreduce;
        s.compression_bytes =
            compression::compressed_reducer_bytes(layout, o.compression, mode, in.host_of_ranks, in.hierarchy_allowed);
        if (plan.after_update == AfterUpdate::average_params) // LocalSGD: the anchor and a bucket of scratch
            s.compression_bytes += full + layout.max_bucket_padded() * elem;
    }
    return m;
}

MemoryPlan MemoryPlan::for_rank(ParameterSet layout, const OptimizerOptions &optimizer, const ShardingOptions &options,
                                int world_size, int rank, const std::vector<int> &host_of_ranks, bool external_params,
                                int device_space) {
    require(world_size >= 1 && rank >= 0 && rank < world_size, ErrorCode::invalid_argument,
            "memory plan: rank " + std::to_string(rank) + " of " + std::to_string(world_size) + " ranks");
    require(host_of_ranks.empty() || int(host_of_ranks.size()) == world_size, ErrorCode::invalid_argument,
            "memory plan: " + std::to_string(host_of_ranks.size()) + " hosts given for " + std::to_string(world_size) +
                " ranks");
    ResolvedConfiguration resolved = resolve_configuration(std::move(layout), optimizer, options);
    const ShardingOptions &o = resolved.sharding;
    validate_sharding_options(o);
    resolved.optimizer.validate();
    const int slots = Optimizer::create(resolved.optimizer)->state_slots();
    if (o.strategy == Strategy::async_sgd) {
        resolved.layout.plan(world_size);
        return async_sgd(resolved.layout, rank, slots);
    }
    const GridPlace place = grid_place(o, world_size, rank);
    // The shard group: the world ranks of this one's pipeline stage, tensor rank and replica, in
    // data-parallel order; their hosts numbered by first appearance, as a split communicator's.
    std::vector<int> group_hosts;
    if (!host_of_ranks.empty())
        for (int q = 0; q < world_size; ++q) {
            const GridPlace other = grid_place(o, world_size, q);
            if (other.pp_rank == place.pp_rank && other.tp_rank == place.tp_rank && other.replica_rank == place.replica_rank)
                group_hosts.push_back(host_of_ranks[std::size_t(q)]);
        }
    std::vector<int> renumbered, seen;
    for (int h : group_hosts) {
        auto it = std::find(seen.begin(), seen.end(), h);
        if (it == seen.end()) it = seen.insert(seen.end(), h);
        renumbered.push_back(int(it - seen.begin()));
    }
    resolved.layout.plan(place.shard_size);
    MemoryPlanInputs in;
    in.layout = &resolved.layout;
    in.plan = plan_of(o);
    const bool device = device_space < 0 ? o.memory == MemorySpace::cuda : device_space != 0;
    in.offload = OffloadPlan::of(o, o.cpu_offload_optimizer && device);
    in.options = o;
    in.shard_rank = place.shard_rank;
    in.state_slots = slots;
    in.external_params = external_params;
    in.host_of_ranks = renumbered;
    in.hierarchy_allowed = compression::hierarchy_allowed_here();
    return of(in);
}

std::size_t async_sgd_message_bytes(std::size_t shard_bytes, int world) {
    return 2 * (kAsyncGradientHeaderBytes + shard_bytes) + (std::size_t(world) + 1) * (kAsyncReplyHeaderBytes + shard_bytes) +
           shard_bytes;
}

MemoryPlan MemoryPlan::async_sgd(const ParameterSet &layout, int rank, int state_slots) {
    require(layout.planned(), ErrorCode::internal, "MemoryPlan: the layout is not planned");
    const std::size_t elem = layout.element_size(), full = layout.padded_count() * elem,
                      shard = layout.shard_count() * elem;
    MemoryPlan m;
    MemoryStats &s = m.stats;
    s.params_bytes = full + shard; // the view and the master shard
    s.grads_bytes = full;
    s.optimizer_state_bytes = owned_state_elements(async_sgd_plan(), layout, rank) * elem * std::size_t(state_slots);
    s.buffer_bytes = s.peak_buffer_bytes = async_sgd_message_bytes(shard, layout.world_size());
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

void require_fits(const MemoryPlan &need, HostSide side, int ranks_here, Strategy strategy, std::size_t parameters,
                  const char *optimizer) {
    const std::size_t available = available_memory_bytes();
    if (available == 0) return; // unknown: nothing to compare against
    const MemoryStats &s = need.stats;
    const bool space = side == HostSide::space;
    const std::size_t per_rank = space ? need.space_bytes() : need.host_bytes();
    const std::size_t total = per_rank * std::size_t(ranks_here);
    if (total <= available) return;
    const std::string parts =
        space ? "parameters " + gigabytes(s.params_bytes - need.caller_bytes) + ", gradients " + gigabytes(s.grads_bytes) +
                    ", optimizer state " + gigabytes(s.optimizer_state_bytes) + ", buffers " +
                    gigabytes(s.buffer_bytes + s.compression_bytes)
              : "parameters " + gigabytes(s.host_params_bytes) + ", gradients " + gigabytes(s.host_grads_bytes) +
                    ", optimizer state " + gigabytes(s.host_optimizer_state_bytes);
    throw Error(ErrorCode::out_of_memory,
                std::string(strategy_name(strategy)) + " with " + optimizer + " over " + std::to_string(parameters) +
                    " parameters needs " + gigabytes(per_rank) + (space ? "" : " of host memory") + " per rank (" + parts +
                    ") x " + std::to_string(ranks_here) + " ranks on this host = " + gigabytes(total) + ", but only " +
                    gigabytes(available) + " is available; shard further (zero2, fsdp) or use more hosts");
}

} // namespace shardopt

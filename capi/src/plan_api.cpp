// The planner through the C ABI: shardopt_plan_* over shardopt/planner.hpp.
#include <cstring>

#include "capi_internal.hpp"
#include "options_convert.hpp"
#include "shardopt/planner.hpp"

using namespace shardopt;
using namespace shardopt::capi;

struct shardopt_plan_s {
    std::uint32_t tag = 0x706c616e; // "plan"
    planner::PlanReport report;
};

namespace {

shardopt_plan_s *plan_of(shardopt_plan p) {
    require(p != nullptr, ErrorCode::invalid_argument, "plan is NULL");
    require(p->tag == 0x706c616e, ErrorCode::invalid_argument, "not a plan handle (destroyed already?)");
    return p;
}

template <typename T> T or_value(T given, T fallback) { return given != T(0) ? given : fallback; }

planner::Cluster cluster_from(const shardopt_plan_cluster *user) {
    const auto c = read_struct(user, "plan cluster", sizeof(std::size_t) + sizeof(std::int32_t));
    planner::Cluster k;
    k.intra = {2e-6, 10e9};
    k.inter = {20e-6, 12.5e9};
    k.update_bandwidth = 10e9;
    k.gpu_update_bandwidth = 2.5e12;
    k.pcie = {10e-6, 25e9};
    if (c.profile_json) k = planner::cluster_from_json(c.profile_json);
    k.hosts = or_value(c.hosts, k.hosts);
    k.ranks_per_host = or_value(c.ranks_per_host, k.ranks_per_host);
    require(c.memory == SHARDOPT_MEMORY_HOST || c.memory == SHARDOPT_MEMORY_CUDA, ErrorCode::invalid_argument,
            "plan cluster: memory must be SHARDOPT_MEMORY_HOST or SHARDOPT_MEMORY_CUDA");
    if (c.memory == SHARDOPT_MEMORY_CUDA) k.memory = MemorySpace::cuda;
    k.device_memory = or_value<std::uint64_t>(c.device_memory_bytes, k.device_memory);
    k.host_memory = or_value<std::uint64_t>(c.host_memory_bytes, k.host_memory);
    k.intra.bandwidth = or_value(c.intra_bandwidth, k.intra.bandwidth);
    k.intra.latency = or_value(c.intra_latency, k.intra.latency);
    k.inter.bandwidth = or_value(c.inter_bandwidth, k.inter.bandwidth);
    k.inter.latency = or_value(c.inter_latency, k.inter.latency);
    k.update_bandwidth = or_value(c.update_bandwidth, k.update_bandwidth);
    k.gpu_update_bandwidth = or_value(c.gpu_update_bandwidth, k.gpu_update_bandwidth);
    k.pcie.bandwidth = or_value(c.pcie_bandwidth, k.pcie.bandwidth);
    require(c.hosts >= 0 && c.ranks_per_host >= 0, ErrorCode::invalid_argument,
            "plan cluster: hosts and ranks_per_host must be >= 1 (0: the default)");
    require(k.memory != MemorySpace::cuda || k.device_memory > 0, ErrorCode::invalid_argument,
            "plan cluster: device_memory_bytes is required with CUDA memory");
    planner::validate_cluster(k);
    return k;
}

OptimizerOptions optimizer_or_adam(const shardopt_optimizer_options *user) {
    return user ? optimizer_options_from(user) : OptimizerOptions::defaults(OptimizerKind::adam);
}

shardopt_plan_entry entry_of(const planner::Plan &p) {
    shardopt_plan_entry e{};
    std::strncpy(e.name, p.name.c_str(), sizeof e.name - 1);
    e.fits = p.fits ? 1 : 0;
    const ShardingOptions &o = p.options;
    e.strategy = shardopt_strategy(o.strategy);
    e.hybrid_data_strategy = shardopt_strategy(o.hybrid_data_strategy);
    e.pipeline_parallel_size = o.pipeline_parallel_size;
    e.tensor_parallel_size = o.tensor_parallel_size;
    e.data_parallel_size = o.data_parallel_size;
    e.hsdp_replicas = o.hsdp_replicas;
    e.cpu_offload_optimizer = o.cpu_offload_optimizer;
    e.cpu_offload_gradients = o.cpu_offload_gradients;
    e.cpu_offload_params = o.cpu_offload_params;
    const MemoryStats &m = p.memory;
    e.params_bytes = m.params_bytes;
    e.grads_bytes = m.grads_bytes;
    e.optimizer_state_bytes = m.optimizer_state_bytes;
    e.buffer_bytes = m.buffer_bytes;
    e.compression_bytes = m.compression_bytes;
    e.host_params_bytes = m.host_params_bytes;
    e.host_grads_bytes = m.host_grads_bytes;
    e.host_optimizer_state_bytes = m.host_optimizer_state_bytes;
    e.device_bytes = p.device_bytes;
    e.host_bytes = p.host_bytes;
    e.sent_intra_bytes = p.sent_intra;
    e.sent_inter_bytes = p.sent_inter;
    const planner::TimeBreakdown &t = p.time;
    e.step_seconds = t.step;
    e.compute_seconds = t.compute;
    e.exposed_comm_seconds = t.exposed_comm;
    e.update_seconds = t.update;
    e.post_update_seconds = t.post_update;
    e.bubble_seconds = t.bubble;
    e.tensor_comm_seconds = t.tensor_comm;
    e.reduce_comm_seconds = t.reduce_comm;
    return e;
}

} // namespace

extern "C" {

SHARDOPT_API shardopt_status shardopt_plan_create(const shardopt_plan_request *request,
                                                  const shardopt_plan_cluster *cluster, shardopt_plan *out) {
    return guard(__func__, [&] {
        not_null(out, "out");
        const auto r = read_struct(request, "plan request", sizeof(std::size_t) + sizeof(void *));
        const planner::Cluster c = cluster_from(cluster);
        planner::ModelSpec model;
        planner::RunSpec run;
        if (r.layout) {
            model.layout = params_of(r.layout);
            require(model.layout.tensor_count() > 0, ErrorCode::invalid_argument, "plan request: the layout has no tensors");
            run.dtype = model.layout.dtype();
        } else {
            require(r.parameters >= 1, ErrorCode::invalid_argument,
                    "plan request: give a layout or a parameter count >= 1");
            model.parameters = r.parameters;
            run.dtype = dtype_arg(r.dtype);
        }
        require(r.layers >= 0 && r.hidden >= 0 && r.sequence >= 0 && r.micro_batch >= 0, ErrorCode::invalid_argument,
                "plan request: layers, hidden, sequence and micro_batch must be >= 0");
        model.layers = r.layers;
        model.hidden = r.hidden;
        model.sequence = r.sequence;
        model.micro_batch = or_value(r.micro_batch, 1);
        run.optimizer = optimizer_or_adam(r.optimizer);
        const ShardingOptions base = r.sharding ? sharding_options_from(r.sharding) : ShardingOptions{};
        run.base = base;
        run.compute_seconds = r.compute_seconds;
        run.reserve_bytes = r.reserve_bytes;
        require(r.search == SHARDOPT_AUTO || r.search == SHARDOPT_ENABLE || r.search == SHARDOPT_DISABLE,
                ErrorCode::invalid_argument, "plan request: search must be a shardopt_switch");
        std::unique_ptr<shardopt_plan_s> h(new shardopt_plan_s);
        if (r.search == SHARDOPT_DISABLE) {
            h->report.plans.push_back(planner::evaluate(model, c, run, base));
            h->report.fitting = h->report.plans.front().fits ? 1 : 0;
        } else {
            h->report = planner::plan(model, c, run);
        }
        *out = h.release();
    });
}

SHARDOPT_API shardopt_status shardopt_plan_destroy(shardopt_plan plan) {
    return guard(__func__, [&] {
        if (!plan) return;
        plan_of(plan)->tag = 0;
        delete plan;
    });
}

SHARDOPT_API shardopt_status shardopt_plan_count(shardopt_plan plan, int32_t *count, int32_t *fitting) {
    return guard(__func__, [&] {
        const shardopt_plan_s *p = plan_of(plan);
        not_null(count, "count");
        *count = int32_t(p->report.plans.size());
        if (fitting) *fitting = p->report.fitting;
    });
}

SHARDOPT_API shardopt_status shardopt_plan_entry_get(shardopt_plan plan, int32_t index, shardopt_plan_entry *entry) {
    return guard(__func__, [&] {
        const shardopt_plan_s *p = plan_of(plan);
        not_null(entry, "entry");
        check_out_struct(entry, "plan entry");
        require(index >= 0 && std::size_t(index) < p->report.plans.size(), ErrorCode::invalid_argument,
                "plan entry " + std::to_string(index) + " out of range (" + std::to_string(p->report.plans.size()) +
                    " candidates)");
        write_struct(entry, entry_of(p->report.plans[std::size_t(index)]), "plan entry");
    });
}

SHARDOPT_API shardopt_status shardopt_plan_rank_memory(shardopt_params params, const shardopt_optimizer_options *optimizer,
                                                       const shardopt_sharding_options *sharding, int32_t world_size,
                                                       int32_t rank, shardopt_memory_stats *stats) {
    return guard(__func__, [&] {
        const ParameterSet &layout = params_of(params);
        not_null(stats, "stats");
        check_out_struct(stats, "memory stats");
        require(layout.tensor_count() > 0, ErrorCode::invalid_argument, "the parameter set has no tensors");
        const ShardingOptions s = sharding ? sharding_options_from(sharding) : ShardingOptions{};
        write_memory_stats(stats, planner::rank_memory(layout, optimizer_or_adam(optimizer), s, world_size, rank));
    });
}

} // extern "C"

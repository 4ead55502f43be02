// The search: every strategy (and hybrid grid, HSDP, ZeRO-Offload variant) the library can run
// on the cluster, its memory from the library's memory plan and its step time from the step
// model; those that fit first, fastest first.
#include <algorithm>
#include <cmath>
#include <string>

#include "../sharding/memory_plan.hpp"
#include "memory_model.hpp"
#include "model_layout.hpp"
#include "sharding/hybrid_grid.hpp"
#include "shardopt/error.hpp"
#include "step_time.hpp"

namespace shardopt::planner {
namespace {

std::string describe(const ShardingOptions &o, const Cluster &c) {
    std::string name = strategy_name(o.strategy);
    if (o.strategy == Strategy::hybrid) {
        const GridPlace g = grid_place(o, c.ranks(), 0);
        if (o.hsdp_replicas > 1 && g.pp_size == 1 && g.tp_size == 1)
            name = "hsdp (" + std::string(strategy_name(o.hybrid_data_strategy)) + " in " + std::to_string(g.shard_size) +
                   " ranks x " + std::to_string(o.hsdp_replicas) + " replicas)";
        else
            name = "hybrid pp" + std::to_string(g.pp_size) + " tp" + std::to_string(g.tp_size) + " dp" +
                   std::to_string(g.dp_size) + " " + strategy_name(o.hybrid_data_strategy);
    }
    if (o.cpu_offload_optimizer)
        name += std::string(" +offload") + (o.cpu_offload_gradients ? "+grads" : "") + (o.cpu_offload_params ? "+params" : "");
    if (o.compression.enabled()) name += std::string(" +") + compression_name(o.compression.method);
    return name;
}

// The hosts x ranks of a group of `size` ranks whose consecutive members are `stride` world
// ranks apart (the grid's rank order), on hosts of ranks_per_host ranks.
Group group_of(const Cluster &c, int size, int stride, bool hierarchical) {
    const int rph = c.ranks_per_host;
    if (size <= 1) return Group{1, 1, hierarchical};
    if (stride >= rph) return Group{size, 1, hierarchical}; // one member per host
    const int per_host = std::max(1, std::min(size, rph / stride));
    if (size % per_host != 0) return Group{size, 1, hierarchical};
    return Group{size / per_host, per_host, hierarchical};
}

void check_inputs(const ModelSpec &model, const Cluster &cluster, const RunSpec &run) {
    validate_cluster(cluster);
    require(model.layout.tensor_count() > 0 || model.parameters >= 1.0, ErrorCode::invalid_argument,
            "the model has no parameters: give a parameter count or a layout");
    require(std::isfinite(run.compute_seconds) && run.compute_seconds >= 0.0, ErrorCode::invalid_argument,
            "the compute time per step must be >= 0");
    require(run.backward_share > 0.0 && run.backward_share < 1.0, ErrorCode::invalid_argument,
            "the backward's share of the compute must be in (0, 1)");
    require(run.micro_batches >= 0, ErrorCode::invalid_argument, "micro-batches must be >= 0");
    require(run.dtype == DType::f32 || run.dtype == DType::f64, ErrorCode::invalid_argument,
            "the optimizers keep f32 or f64 parameters");
    run.optimizer.validate();
}

} // namespace

Plan evaluate(const ModelSpec &model, const Cluster &c, const RunSpec &run, const ShardingOptions &given) {
    check_inputs(model, c, run);
    ShardingOptions o = given;
    o.memory = c.memory;
    validate_sharding_options(o);
    const int n = c.ranks();
    const GridPlace g0 = grid_place(o, n, 0);
    Plan p;
    p.options = o;
    p.name = describe(o, c);
    const int slots = Optimizer::create(run.optimizer)->state_slots();
    const bool compressed = o.compression.enabled();
    std::vector<int> hosts;
    if (compressed) // only the compressed reducer's memory depends on where the ranks are
        for (int r = 0; r < n; ++r) hosts.push_back(r / c.ranks_per_host);
    // Memory: the first rank of every pipeline stage (a group's first rank holds the most: the
    // padding is at the end of every bucket), as the library's memory plan counts it.
    std::vector<ParameterSet> stages;
    double most = -1.0;
    int worst = 0;
    for (int s = 0; s < g0.pp_size; ++s) {
        stages.push_back(stage_layout(model, run.dtype, s, g0.pp_size, g0.tp_size));
        const int rank = s * g0.dp_size * g0.tp_size;
        const MemoryPlan plan = MemoryPlan::for_rank(stages.back(), run.optimizer, o, n, rank, hosts, false,
                                                     c.memory == MemorySpace::cuda ? 1 : 0);
        const double bytes = double(plan.space_bytes()) + double(plan.host_bytes());
        if (bytes > most) {
            most = bytes;
            worst = s;
            p.memory = plan.stats;
            p.device_bytes = plan.space_bytes();
            p.host_bytes = plan.host_bytes();
        }
    }
    // Fit: a GPU's memory (cuda) or the host's shared by its ranks, plus what each rank reserves.
    const double rph = c.ranks_per_host;
    p.fits = true;
    if (c.memory == MemorySpace::cuda) {
        p.host_total_bytes = std::uint64_t(double(p.host_bytes) * rph);
        if (p.device_bytes + run.reserve_bytes > c.device_memory) {
            p.fits = false;
            p.why_not = "needs " + std::to_string((p.device_bytes + run.reserve_bytes) / 1000000) + " MB of a GPU's " +
                        std::to_string(c.device_memory / 1000000) + " MB";
        }
    } else {
        p.host_total_bytes = std::uint64_t(double(p.device_bytes + run.reserve_bytes) * rph);
    }
    if (p.fits && c.host_memory > 0 && p.host_total_bytes > c.host_memory) {
        p.fits = false;
        p.why_not = "needs " + std::to_string(p.host_total_bytes / 1000000) + " MB of host memory per host, which has " +
                    std::to_string(c.host_memory / 1000000) + " MB";
    }
    // Time: the stage holding the most, simulated.
    ParameterSet layout = bucketed_layout(stages[std::size_t(worst)], o); // as create() cuts it
    StepModel m;
    m.cluster = &c;
    m.options = o;
    m.plan = plan_of(o);
    m.offload = o.cpu_offload_optimizer && c.memory == MemorySpace::cuda;
    layout.plan(g0.shard_size);
    m.layout = &layout;
    const bool hier = true;
    m.shard = group_of(c, g0.shard_size, g0.tp_size, hier);
    m.replica = g0.dp_size / g0.shard_size > 1 ? group_of(c, g0.dp_size / g0.shard_size, g0.tp_size * g0.shard_size, hier)
                                               : Group{};
    m.world = Group{c.hosts, c.ranks_per_host, hier};
    m.tensor = group_of(c, g0.tp_size, 1, hier);
    m.owned = owned_state_elements(m.plan, layout, 0);
    m.state_slots = slots;
    m.forward = run.compute_seconds * (1.0 - run.backward_share);
    m.backward = run.compute_seconds * run.backward_share;
    const ModelShape shape = model.layout.tensor_count() > 0 ? ModelShape{} : model_shape(model);
    const double act = double(model.sequence) * model.micro_batch * shape.hidden * double(model.activation_element_bytes);
    if (run.tokens_per_step > 0 && model.sequence > 0)
        m.micro_batches = std::max(1.0, std::ceil(run.tokens_per_step / (double(g0.dp_size) * model.sequence * model.micro_batch)));
    if (g0.pp_size > 1) {
        m.pipeline.stages = g0.pp_size;
        m.pipeline.micro_batches = run.micro_batches > 0 ? run.micro_batches
                                   : run.tokens_per_step > 0 && model.sequence > 0 ? int(m.micro_batches)
                                                                                   : 4 * g0.pp_size;
        if (run.schedule == PipelineSchedule::interleaved_1f1b) // a multiple of the stages
            m.pipeline.micro_batches = (m.pipeline.micro_batches + g0.pp_size - 1) / g0.pp_size * g0.pp_size;
        m.pipeline.schedule = run.schedule;
        m.pipeline.virtual_stages = run.schedule == PipelineSchedule::interleaved_1f1b ? 2 : 1;
        validate_pipeline_shape(m.pipeline);
        const bool across = g0.dp_size * g0.tp_size >= c.ranks_per_host;
        m.stage_link = across ? c.inter : c.intra;
        if (!across && c.memory == MemorySpace::host) m.stage_link.bandwidth = c.intra.bandwidth / 2; // a copy in, a copy out
        m.activation_bytes = act;
    }
    if (g0.tp_size > 1 && shape.layers > 0) { // two allreduces in each layer's forward, two in its backward
        m.tensor_collectives = 4 * std::max(1, shape.layers / g0.pp_size);
        m.tensor_bytes = act;
    }
    const StepTime st = simulate_step(m);
    p.time = st.time;
    p.sent_intra = std::uint64_t(st.sent.sent_intra);
    p.sent_inter = std::uint64_t(st.sent.sent_inter);
    return p;
}

PlanReport plan(const ModelSpec &model, const Cluster &c, const RunSpec &run) {
    check_inputs(model, c, run);
    const int n = c.ranks();
    std::vector<Strategy> inside = run.strategies;
    if (inside.empty()) inside = {Strategy::ddp, Strategy::zero1, Strategy::zero2, Strategy::fsdp};
    // Tensor and pipeline parallelism cost activations between ranks: tried for a transformer
    // whose activations are known (a sequence length), or when asked for.
    const bool shaped = model.layout.tensor_count() == 0 && model.sequence > 0;
    const int max_tp = run.max_tensor_parallel > 0 ? run.max_tensor_parallel : (shaped ? c.ranks_per_host : 1);
    const int max_pp = run.max_pipeline_parallel > 0 ? run.max_pipeline_parallel : (shaped ? std::max(1, c.hosts) : 1);
    std::vector<ShardingOptions> candidates;
    auto base = [&](Strategy s) {
        ShardingOptions o = run.base;
        o.strategy = s;
        o.memory = c.memory;
        o.pipeline_parallel_size = o.tensor_parallel_size = o.hsdp_replicas = 1;
        o.data_parallel_size = -1;
        return o;
    };
    for (Strategy s : inside) {
        if (s == Strategy::hybrid || s == Strategy::async_sgd) continue;
        candidates.push_back(base(s));
    }
    if (c.hosts > 1 && c.ranks_per_host > 1) // HSDP: FSDP inside each host, replicated across hosts
        for (Strategy s : {Strategy::fsdp, Strategy::zero2})
            if (std::find(inside.begin(), inside.end(), s) != inside.end()) {
                ShardingOptions o = base(Strategy::hybrid);
                o.hybrid_data_strategy = s;
                o.hsdp_replicas = c.hosts;
                candidates.push_back(o);
            }
    for (int tp = 1; tp <= std::min(max_tp, c.ranks_per_host); tp *= 2)
        for (int pp = 1; pp <= max_pp; pp *= 2) {
            if ((tp == 1 && pp == 1) || n % (tp * pp) != 0) continue;
            for (Strategy s : inside) {
                if (s == Strategy::local_sgd || s == Strategy::hybrid || s == Strategy::async_sgd) continue;
                if (s == Strategy::fsdp && pp > 1) continue; // FSDP inside a pipeline: not modelled
                ShardingOptions o = base(Strategy::hybrid);
                o.pipeline_parallel_size = pp;
                o.tensor_parallel_size = tp;
                o.hybrid_data_strategy = s;
                candidates.push_back(o);
            }
        }
    if (c.memory == MemorySpace::cuda && run.try_offload) {
        for (Strategy s : {Strategy::zero2, Strategy::fsdp}) {
            if (std::find(inside.begin(), inside.end(), s) == inside.end()) continue;
            ShardingOptions o = base(s);
            o.cpu_offload_optimizer = true;
            candidates.push_back(o);
            o.cpu_offload_gradients = true;
            if (s == Strategy::fsdp) o.cpu_offload_params = true;
            candidates.push_back(o);
        }
    }
    PlanReport report;
    for (const ShardingOptions &o : candidates) {
        try {
            report.plans.push_back(evaluate(model, c, run, o));
        } catch (const Error &) { // a grid the model cannot be cut into (fewer tensors than stages)
        }
    }
    require(!report.plans.empty(), ErrorCode::invalid_argument, "no strategy can run this model on this cluster");
    std::stable_sort(report.plans.begin(), report.plans.end(), [](const Plan &a, const Plan &b) {
        if (a.fits != b.fits) return a.fits;
        return a.time.step < b.time.step;
    });
    for (const Plan &p : report.plans) report.fitting += p.fits ? 1 : 0;
    return report;
}

} // namespace shardopt::planner

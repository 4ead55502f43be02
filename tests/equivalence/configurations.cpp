#include "configurations.hpp"

#include <algorithm>
#include <stdexcept>

namespace shardopt::equivalence {
namespace {

const char *dtype_label(DType d) { return d == DType::f64 ? "f64" : "f32"; }

} // namespace

std::vector<Config> configurations() {
    std::vector<Config> all;
    const std::vector<Rule> every_rule = rules();
    auto rule = [&](const char *name) {
        for (const Rule &r : every_rule)
            if (std::string(r.name) == name) return r;
        throw std::logic_error(name);
    };
    const std::vector<Rule> some_rules = {rule("sgd_momentum"), rule("adam"), rule("lamb")};
    const DType dtypes[] = {DType::f32, DType::f64};
    auto add = [&](const std::string &name, int ranks, DType dtype, const Rule &r, const ShardingOptions &o) -> Config & {
        Config c;
        c.name = name + " " + r.name + " " + dtype_label(dtype) + " ws" + std::to_string(ranks);
        c.ranks = ranks;
        c.dtype = dtype;
        c.optimizer = r.options;
        c.sharding = o;
        all.push_back(c);
        return all.back();
    };
    auto sharding = [](Strategy s) {
        ShardingOptions o;
        o.strategy = s;
        o.local_sgd_period = 3;
        return o;
    };
    const Strategy flat[] = {Strategy::ddp, Strategy::zero1, Strategy::zero2, Strategy::fsdp, Strategy::local_sgd};
    const GradientCompression methods[] = {GradientCompression::bf16,  GradientCompression::fp16,
                                           GradientCompression::int8,  GradientCompression::int4,
                                           GradientCompression::top_k, GradientCompression::power_sgd};

    // Every flat strategy x rule x dtype x world size, plain.
    for (Strategy s : flat)
        for (int ws = 1; ws <= 4; ++ws)
            for (DType d : dtypes)
                for (const Rule &r : every_rule) add(strategy_name(s), ws, d, r, sharding(s));

    // Options, on three (rule, dtype) pairs.
    const std::pair<Rule, DType> option_rules[] = {
        {rule("adam"), DType::f32}, {rule("lamb"), DType::f64}, {rule("sgd_momentum"), DType::f32}};
    for (Strategy s : flat)
        for (int ws = 1; ws <= 4; ++ws)
            for (const auto &[r, d] : option_rules) {
                const std::string n = strategy_name(s);
                ShardingOptions o = sharding(s);
                o.gradient_accumulation_steps = 2;
                add(n + " accumulate2", ws, d, r, o);
                o = sharding(s);
                o.max_grad_norm = 0.05;
                add(n + " clip", ws, d, r, o);
                o.gradient_accumulation_steps = 3;
                add(n + " clip+accumulate3", ws, d, r, o);
                add(n + " nonfinite", ws, d, r, sharding(s)).nonfinite_step = 1;
                if (ws == 2 || ws == 3) { // step() reduces the buckets never marked ready
                    o = sharding(s);
                    o.staging_buffers = 8; // ZeRO-2, FSDP: a buffer for every bucket left open
                    add(n + " step_reduces", ws, d, r, o).mark_ready = false;
                }
                if (s == Strategy::zero1 || s == Strategy::zero2) {
                    o = sharding(s);
                    o.overlap_param_gather = true;
                    add(n + " overlap_param_gather", ws, d, r, o);
                }
                if (s == Strategy::zero2 || s == Strategy::fsdp) {
                    o = sharding(s);
                    o.staging_buffers = 2;
                    add(n + " staging2", ws, d, r, o);
                }
                if (s == Strategy::fsdp) {
                    o = sharding(s);
                    o.fsdp_prefetch = false;
                    add(n + " no_prefetch", ws, d, r, o);
                }
                if (s == Strategy::local_sgd) {
                    o = sharding(s);
                    o.local_sgd_period = 1;
                    add(n + " period1", ws, d, r, o);
                }
                if (ws == 1) { // host memory: the offload flags are accepted and change nothing
                    o = sharding(s);
                    o.cpu_offload_optimizer = o.cpu_offload_gradients = true;
                    add(n + " offload_flags", ws, d, r, o);
                }
            }
    // One staging buffer and buckets left open: refused, naming them.
    for (Strategy s : {Strategy::zero2, Strategy::fsdp})
        add(std::string(strategy_name(s)) + " step_reduces staging1", 2, DType::f32, rule("adam"), sharding(s))
            .mark_ready = false;

    // Gradient compression: every method on every flat strategy at 2-4 ranks (adam f32), at 2
    // ranks in f64; at 3 ranks with momentum SGD, without error feedback, with clipping and
    // accumulation.
    for (Strategy s : flat)
        for (int ws = 2; ws <= 4; ++ws)
            for (DType d : dtypes)
                for (GradientCompression m : methods) {
                    if (d == DType::f64 && ws != 2) continue;
                    ShardingOptions o = sharding(s);
                    o.compression.method = m;
                    o.compression.ratio = 0.25;
                    o.compression.block_size = 16;
                    o.compression.power_sgd_rank = 2;
                    o.compression.power_sgd_min_elements = 16;
                    const std::string n = std::string(strategy_name(s)) + " compress_" + compression_name(m);
                    add(n, ws, d, rule("adam"), o);
                    if (ws == 3) {
                        add(n, ws, d, rule("sgd_momentum"), o);
                        if (o.compression.keeps_residuals()) {
                            o.compression.error_feedback = false;
                            add(n + "_no_feedback", ws, d, rule("adam"), o);
                            o.compression.error_feedback = true;
                        }
                        o.gradient_accumulation_steps = 2;
                        o.max_grad_norm = 0.05;
                        add(n + " clip+accumulate2", ws, d, rule("adam"), o);
                    }
                }

    // Update threads: a layout past the threaded update's threshold, 1 and 4 threads.
    for (Strategy s : {Strategy::ddp, Strategy::zero1, Strategy::fsdp, Strategy::local_sgd})
        for (int ws : {1, 2})
            for (const Rule &r : {rule("adam"), rule("lamb")})
                for (int threads : {1, 4}) {
                    ShardingOptions o = sharding(s);
                    o.update_threads = threads;
                    add(std::string(strategy_name(s)) + " big threads" + std::to_string(threads), ws, DType::f32, r, o)
                        .big = true;
                }

    // Hybrid grids (pp x tp x dp) with each data strategy inside, and HSDP.
    struct Grid {
        int pp, tp, dp;
    };
    const Grid grids[] = {{1, 2, 1}, {2, 1, 1}, {1, 1, 2}, {1, 3, 1}, {3, 1, 1}, {1, 2, 2}, {2, 1, 2}, {2, 2, 1}};
    for (const Grid &g : grids)
        for (Strategy inside : {Strategy::ddp, Strategy::zero1, Strategy::zero2, Strategy::fsdp})
            for (DType d : dtypes)
                for (const Rule &r : some_rules) {
                    if (d == DType::f64 && r.options.kind != OptimizerKind::adam) continue;
                    ShardingOptions o = sharding(Strategy::hybrid);
                    o.pipeline_parallel_size = g.pp;
                    o.tensor_parallel_size = g.tp;
                    o.data_parallel_size = g.dp;
                    o.hybrid_data_strategy = inside;
                    const std::string n = "hybrid pp" + std::to_string(g.pp) + "tp" + std::to_string(g.tp) + "dp" +
                                          std::to_string(g.dp) + " " + strategy_name(inside);
                    add(n, g.pp * g.tp * g.dp, d, r, o);
                    if (g.dp == 2 && d == DType::f32 && r.options.kind == OptimizerKind::adam) {
                        o.gradient_accumulation_steps = 2;
                        o.max_grad_norm = 0.05;
                        add(n + " clip+accumulate2", g.pp * g.tp * g.dp, d, r, o);
                    }
                }
    for (int ws : {2, 4})
        for (DType d : dtypes)
            for (const Rule &r : some_rules) {
                ShardingOptions o = sharding(Strategy::hybrid);
                o.hybrid_data_strategy = Strategy::fsdp;
                o.hsdp_replicas = 2;
                add("hsdp replicas2", ws, d, r, o);
            }

    // Asynchronous SGD at staleness 0 (DDP's result), every rule.
    for (int ws = 1; ws <= 4; ++ws)
        for (DType d : dtypes)
            for (const Rule &r : every_rule) add("async_sgd staleness0", ws, d, r, sharding(Strategy::async_sgd));

    // The step engine on the emulated device space, without and with each ZeRO-Offload mode.
    struct Mode {
        const char *name;
        bool optimizer, gradients, params;
    };
    const Mode modes[] = {{"device", false, false, false},
                          {"offload_optimizer", true, false, false},
                          {"offload_optimizer+gradients", true, true, false},
                          {"offload_optimizer+params", true, false, true},
                          {"offload_all", true, true, true}};
    for (Strategy s : {Strategy::ddp, Strategy::zero1, Strategy::zero2, Strategy::fsdp})
        for (const Mode &m : modes) {
            if (m.params && s != Strategy::fsdp) continue;
            for (int ws : {1, 2, 3, 4})
                for (DType d : dtypes)
                    for (const Rule &r : some_rules) {
                        // adam and lamb in f32 at every world size; momentum SGD and f64 at 2 ranks
                        if ((d == DType::f64 || r.options.kind == OptimizerKind::sgd) && ws != 2) continue;
                        if (d == DType::f64 && r.options.kind != OptimizerKind::adam) continue;
                        ShardingOptions o = sharding(s);
                        o.cpu_offload_optimizer = m.optimizer;
                        o.cpu_offload_gradients = m.gradients;
                        o.cpu_offload_params = m.params;
                        add(std::string("emulated ") + strategy_name(s) + " " + m.name, ws, d, r, o).emulated = true;
                        if (ws == 2 && d == DType::f32 && r.options.kind == OptimizerKind::adam) {
                            o.gradient_accumulation_steps = 2;
                            o.max_grad_norm = 0.05;
                            add(std::string("emulated ") + strategy_name(s) + " " + m.name + " clip+accumulate2", ws, d,
                                r, o)
                                .emulated = true;
                            o = sharding(s);
                            o.cpu_offload_optimizer = m.optimizer;
                            o.cpu_offload_gradients = m.gradients;
                            o.cpu_offload_params = m.params;
                            add(std::string("emulated ") + strategy_name(s) + " " + m.name + " nonfinite", ws, d, r, o)
                                .emulated = true;
                            all.back().nonfinite_step = 1;
                        }
                    }
        }
    std::sort(all.begin(), all.end(), [](const Config &a, const Config &b) { return a.name < b.name; });
    return all;
}

} // namespace shardopt::equivalence

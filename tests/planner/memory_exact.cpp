// planner.memory_exact: the planner's per-rank bytes (planner::rank_memory, the library's memory
// plan) equal memory_stats() exactly, field by field, on every rank of every configuration the
// equivalence suite trains (tests/equivalence/configurations.hpp: every strategy x rule x dtype x
// option at 1-4 ranks, hybrid grids, HSDP, async SGD, the emulated device with each ZeRO-Offload
// mode), and of the ones added here at 5-8 ranks: flat strategies with their options and
// compression methods, ranks placed on hosts (the hierarchical compressed reducer, consecutive
// and interleaved), hybrid grids and HSDP of 8 ranks, caller-owned parameters. Each runs the step
// protocol in-process until every bucket was reduced (LocalSGD: averaged) once; a configuration
// the optimizer refuses is skipped (counted).
//
//   build/tests/planner_memory_exact [--filter TEXT] [--verbose]
#include <atomic>
#include <cstdio>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "configurations.hpp"
#include "emulated_device_space.hpp"
#include "sharding/engine/step_engine.hpp"
#include "shardopt/error.hpp"
#include "shardopt/inprocess.hpp"
#include "shardopt/planner.hpp"
#include "shardopt/sharded_optimizer.hpp"

using namespace shardopt;
using namespace shardopt::equivalence;

namespace {

struct Extra {
    Config config;
    std::vector<int> hosts; // host of each rank (empty: one host)
    bool external = false;  // caller-owned parameters
};

std::string fields(const MemoryStats &m) {
    char text[320];
    std::snprintf(text, sizeof text,
                  "params %zu grads %zu state %zu buffers %zu peak %zu compression %zu host params %zu grads %zu "
                  "state %zu",
                  m.params_bytes, m.grads_bytes, m.optimizer_state_bytes, m.buffer_bytes, m.peak_buffer_bytes,
                  m.compression_bytes, m.host_params_bytes, m.host_grads_bytes, m.host_optimizer_state_bytes);
    return text;
}

bool same(const MemoryStats &a, const MemoryStats &b) { return fields(a) == fields(b); }

// Steps of the protocol until every bucket was reduced once, LocalSGD averaged once. Each is a
// training step: a forward (every unit gathered and released in order), then the protocol's
// backward (in reverse).
template <typename T, typename Opt> void run_steps(Opt &opt, const ParameterSet &layout, const Config &c, int rank) {
    const int micro = c.sharding.gradient_accumulation_steps;
    const bool averages = c.sharding.strategy == Strategy::local_sgd;
    auto step = [&](int s) {
        for (int b = 0; b < layout.bucket_count(); ++b) {
            opt.gather(b);
            opt.release(b);
        }
        protocol_step<T>(opt, layout, c, rank, s);
    };
    int s = 0;
    for (; s < 2 * micro; ++s) step(s);
    while (averages && opt.step_count() < c.sharding.local_sgd_period && s < 64) step(s++);
}

// Empty when rank's memory_stats() equals the plan, else what differs.
template <typename T> std::string check_rank(Communicator &comm, const Config &c, const std::vector<int> &hosts, bool external) {
    ParameterSet layout = make_layout(c, stage_of(c, comm.rank()), stages_of(c));
    const MemoryStats planned = planner::rank_memory(layout, c.optimizer, c.sharding, comm.size(), comm.rank(), hosts,
                                                     external, c.emulated ? 1 : -1);
    ParameterSet planned_layout = layout;
    planned_layout.plan(1);
    std::vector<T> initial(planned_layout.element_count());
    for (std::size_t i = 0; i < initial.size(); ++i) initial[i] = initial_value<T>(i);
    MemoryStats measured;
    if (c.emulated) {
        engine::StepEngine engine(std::make_unique<testing::EmulatedDeviceSpace>(), comm.shared_from_this(), layout,
                                  c.optimizer, c.sharding, initial.data());
        run_steps<T>(engine, engine.layout(), c, comm.rank());
        measured = engine.memory_stats();
    } else {
        std::vector<T> own;
        if (external) {
            ParameterSet sized = layout;
            sized.plan(comm.size());
            own.resize(sized.padded_count());
        }
        auto opt = ShardedOptimizer::create(comm.shared_from_this(), layout, c.optimizer, c.sharding, initial.data(),
                                            external ? own.data() : nullptr);
        if (c.sharding.strategy != Strategy::async_sgd) run_steps<T>(*opt, opt->layout(), c, comm.rank());
        measured = opt->memory_stats();
    }
    if (same(planned, measured)) return "";
    return "rank " + std::to_string(comm.rank()) + "\n    planned  " + fields(planned) + "\n    measured " +
           fields(measured);
}

// "ok", "refused: ..." or the ranks that differ.
std::string check(const Config &c, const std::vector<int> &hosts, bool external) {
    std::vector<std::string> outcome(std::size_t(c.ranks));
    try {
        run_on_ranks(make_inprocess_group(c.ranks, hosts), [&](Communicator &comm) {
            outcome[std::size_t(comm.rank())] = c.dtype == DType::f64 ? check_rank<double>(comm, c, hosts, external)
                                                                       : check_rank<float>(comm, c, hosts, external);
        });
    } catch (const std::exception &e) {
        return std::string("refused: ") + e.what();
    }
    std::string differ;
    for (const std::string &o : outcome)
        if (!o.empty()) differ += "\n  " + o;
    return differ.empty() ? "ok" : "differs:" + differ;
}

std::vector<Extra> extras() {
    std::vector<Extra> all;
    const std::vector<Rule> every = rules();
    auto rule = [&](const std::string &name) {
        for (const Rule &r : every)
            if (name == r.name) return r;
        throw std::logic_error(name);
    };
    auto add = [&](const std::string &name, int ranks, DType dtype, const Rule &r, ShardingOptions o,
                   std::vector<int> hosts = {}) -> Extra & {
        Extra e;
        e.config.name = name + " " + r.name + (dtype == DType::f64 ? " f64" : " f32") + " ws" + std::to_string(ranks);
        e.config.ranks = ranks;
        e.config.dtype = dtype;
        e.config.optimizer = r.options;
        o.local_sgd_period = o.local_sgd_period == 4 ? 3 : o.local_sgd_period;
        e.config.sharding = o;
        e.hosts = std::move(hosts);
        all.push_back(e);
        return all.back();
    };
    auto with = [](Strategy s) {
        ShardingOptions o;
        o.strategy = s;
        return o;
    };
    const Strategy flat[] = {Strategy::ddp, Strategy::zero1, Strategy::zero2, Strategy::fsdp, Strategy::local_sgd};
    for (Strategy s : flat)
        for (int ws = 5; ws <= 8; ++ws) {
            const std::string n = strategy_name(s);
            add(n, ws, DType::f32, rule("adam"), with(s));
            add(n, ws, DType::f64, rule("lamb"), with(s));
            ShardingOptions o = with(s);
            o.gradient_accumulation_steps = 2;
            o.staging_buffers = 3;
            o.fsdp_prefetch = ws % 2 == 0;
            add(n + " accumulate2 staging3", ws, DType::f32, rule("sgd_momentum"), o);
            for (GradientCompression m : {GradientCompression::int8, GradientCompression::top_k, GradientCompression::power_sgd}) {
                o = with(s);
                o.compression.method = m;
                o.compression.ratio = 0.25;
                o.compression.block_size = 16;
                o.compression.power_sgd_rank = 2;
                o.compression.power_sgd_min_elements = 16;
                add(n + " compress_" + compression_name(m), ws, DType::f32, rule("adam"), o);
            }
        }
    // Compression across hosts: 2 x 2, 4 x 2, 2 x 4, block and interleaved placements.
    const std::vector<std::pair<std::string, std::vector<int>>> placements = {
        {"hosts2x2", {0, 0, 1, 1}},       {"hosts2x2 cyclic", {0, 1, 0, 1}},
        {"hosts4x2", {0, 0, 1, 1, 2, 2, 3, 3}}, {"hosts2x4 cyclic", {0, 1, 0, 1, 0, 1, 0, 1}}};
    for (Strategy s : flat)
        for (const auto &[place, hosts] : placements)
            for (GradientCompression m : {GradientCompression::int8, GradientCompression::int4, GradientCompression::bf16}) {
                ShardingOptions o = with(s);
                o.compression.method = m;
                o.compression.block_size = 16;
                add(std::string(strategy_name(s)) + " " + place + " compress_" + compression_name(m), int(hosts.size()),
                    DType::f32, rule("adam"), o, hosts);
            }
    // Hybrid grids and HSDP of 8 ranks.
    struct Grid {
        int pp, tp, dp;
    };
    for (const Grid &g : {Grid{2, 2, 2}, Grid{1, 2, 4}, Grid{2, 1, 4}, Grid{1, 4, 2}, Grid{4, 1, 2}})
        for (Strategy inside : {Strategy::ddp, Strategy::zero1, Strategy::zero2, Strategy::fsdp}) {
            ShardingOptions o = with(Strategy::hybrid);
            o.pipeline_parallel_size = g.pp;
            o.tensor_parallel_size = g.tp;
            o.data_parallel_size = g.dp;
            o.hybrid_data_strategy = inside;
            add("hybrid pp" + std::to_string(g.pp) + "tp" + std::to_string(g.tp) + "dp" + std::to_string(g.dp) + " " +
                    strategy_name(inside),
                8, DType::f32, rule("adam"), o);
        }
    for (int replicas : {2, 4}) {
        ShardingOptions o = with(Strategy::hybrid);
        o.hybrid_data_strategy = Strategy::fsdp;
        o.hsdp_replicas = replicas;
        add("hsdp replicas" + std::to_string(replicas), 8, DType::f32, rule("adam"), o);
        o.compression.method = GradientCompression::int8;
        add("hsdp replicas" + std::to_string(replicas) + " compress_int8", 8, DType::f32, rule("adam"), o,
            {0, 0, 0, 0, 1, 1, 1, 1});
    }
    // Caller-owned parameters.
    for (Strategy s : {Strategy::ddp, Strategy::zero1, Strategy::zero2, Strategy::local_sgd})
        for (int ws : {1, 3, 8}) add(std::string(strategy_name(s)) + " external", ws, DType::f32, rule("adam"), with(s)).external = true;
    // The async SGD backend at 5-8 ranks.
    for (int ws = 5; ws <= 8; ++ws) add("async_sgd", ws, DType::f32, rule("adam"), with(Strategy::async_sgd));
    return all;
}

} // namespace

int main(int argc, char **argv) {
    std::string filter;
    bool verbose = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--filter" && i + 1 < argc) filter = argv[++i];
        else if (a == "--verbose") verbose = true;
        else {
            std::cerr << "usage: planner_memory_exact [--filter TEXT] [--verbose]\n";
            return 2;
        }
    }
    std::vector<Extra> all;
    for (const Config &c : configurations()) all.push_back(Extra{c, {}, false});
    for (const Extra &e : extras()) all.push_back(e);
    int checked = 0, refused = 0, differ = 0, ranks = 0;
    for (const Extra &e : all) {
        if (!filter.empty() && e.config.name.find(filter) == std::string::npos) continue;
        const std::string outcome = check(e.config, e.hosts, e.external);
        if (outcome == "ok") {
            ++checked;
            ranks += e.config.ranks;
        } else if (outcome.rfind("refused", 0) == 0) {
            ++refused;
        } else {
            ++differ;
            std::cerr << e.config.name << ": " << outcome << "\n";
        }
        if (verbose) std::cout << e.config.name << " | " << outcome << "\n";
    }
    std::cout << checked << " configurations (" << ranks << " ranks) equal to memory_stats(), " << differ
              << " differ, " << refused << " refused by the optimizer\n";
    return differ == 0 && checked > 0 ? 0 : 1;
}

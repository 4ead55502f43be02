// shardopt-plan: which strategies fit a model on a cluster, fastest first, with the memory and
// time breakdowns (the planner of shardopt/planner.hpp; docs/planning.md).
//
//   shardopt-plan --params 7e9 --hosts 128 --gpus-per-host 8 --gpu-memory 80GiB \
//                 --intra 900GB/s --inter 400Gbit/s --compute 2s
//   shardopt-plan --layout model.json --profile cluster.json --json
//
// Exit status: 0 when at least one strategy fits; 2 when none does (the table with --all says
// what each would need) and for input it cannot take (an impossible shape, a zero bandwidth, a
// bad file), with a message naming what is wrong.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "shardopt/error.hpp"
#include "shardopt/planner.hpp"
#include "units.hpp"

using namespace shardopt;
using namespace shardopt::plan_tool;
using nlohmann::json;

namespace {

std::string read_file(const std::string &path) {
    std::ifstream in(path);
    if (!in) throw Error(ErrorCode::invalid_argument, "cannot read " + path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// {"dtype": "f32", "bucket_mb": 25, "tensors": [{"name": "w", "rows": 4096, "cols": 4096},
//  {"name": "b", "count": 4096, "tp_replicated": true}, {"end_bucket": true}, ...]}
ParameterSet layout_from_json(const std::string &path, DType &dtype) {
    json j;
    try {
        j = json::parse(read_file(path));
    } catch (const json::exception &e) {
        throw Error(ErrorCode::invalid_argument, path + ": not JSON: " + e.what());
    }
    if (j.contains("dtype")) {
        const std::string d = j.at("dtype").get<std::string>();
        if (d != "f32" && d != "f64") throw Error(ErrorCode::invalid_argument, path + ": dtype must be f32 or f64");
        dtype = d == "f64" ? DType::f64 : DType::f32;
    }
    const double bucket_mb = j.value("bucket_mb", 25.0);
    if (!(bucket_mb > 0)) throw Error(ErrorCode::invalid_argument, path + ": bucket_mb must be > 0");
    ParameterSet layout(dtype, std::size_t(bucket_mb * (1 << 20)));
    if (!j.contains("tensors") || !j.at("tensors").is_array() || j.at("tensors").empty())
        throw Error(ErrorCode::invalid_argument, path + ": \"tensors\" must be a non-empty array");
    int i = 0;
    for (const json &t : j.at("tensors")) {
        if (t.value("end_bucket", false)) {
            layout.end_bucket();
            continue;
        }
        const std::string name = t.value("name", "tensor" + std::to_string(i++));
        const bool replicated = t.value("tp_replicated", false);
        const double rows = t.value("rows", 0.0), cols = t.value("cols", 0.0), count = t.value("count", 0.0);
        if (rows >= 1 && cols >= 1) layout.add_matrix(name, std::size_t(rows), std::size_t(cols), replicated);
        else if (count >= 1) layout.add(name, std::size_t(count), replicated);
        else throw Error(ErrorCode::invalid_argument, path + ": tensor " + name + " needs rows and cols, or count >= 1");
    }
    return layout;
}

Strategy strategy_of(const std::string &s) {
    for (Strategy k : {Strategy::ddp, Strategy::zero1, Strategy::zero2, Strategy::fsdp, Strategy::local_sgd})
        if (s == strategy_name(k)) return k;
    throw Error(ErrorCode::invalid_argument, "unknown strategy '" + s + "' (ddp, zero1, zero2, fsdp, local_sgd)");
}

GradientCompression compression_of(const std::string &s) {
    for (GradientCompression m : {GradientCompression::none, GradientCompression::bf16, GradientCompression::fp16,
                                  GradientCompression::int8, GradientCompression::int4, GradientCompression::top_k,
                                  GradientCompression::power_sgd})
        if (s == compression_name(m)) return m;
    throw Error(ErrorCode::invalid_argument, "unknown compression '" + s + "'");
}

json plan_json(const planner::Plan &p) {
    const MemoryStats &m = p.memory;
    return json{{"strategy", p.name},
                {"fits", p.fits},
                {"why_not", p.why_not},
                {"memory",
                 {{"params", m.params_bytes},
                  {"grads", m.grads_bytes},
                  {"optimizer_state", m.optimizer_state_bytes},
                  {"buffers", m.buffer_bytes},
                  {"compression", m.compression_bytes},
                  {"host_params", m.host_params_bytes},
                  {"host_grads", m.host_grads_bytes},
                  {"host_optimizer_state", m.host_optimizer_state_bytes},
                  {"device_total", p.device_bytes},
                  {"host_total", p.host_bytes},
                  {"host_total_per_host", p.host_total_bytes}}},
                {"time",
                 {{"step", p.time.step},
                  {"compute", p.time.compute},
                  {"exposed_comm", p.time.exposed_comm},
                  {"reduce_comm", p.time.reduce_comm},
                  {"update", p.time.update},
                  {"post_update", p.time.post_update},
                  {"bubble", p.time.bubble},
                  {"tensor_comm", p.time.tensor_comm}}},
                {"sent_per_step", {{"intra", p.sent_intra}, {"inter", p.sent_inter}}}};
}

void print_table(const planner::PlanReport &report, const planner::Cluster &c, bool all) {
    const bool gpu = c.memory == MemorySpace::cuda;
    std::printf("%-38s %4s %10s %9s %9s %9s %9s %9s | %9s %9s %9s %9s %9s %9s | %9s %9s\n", "strategy", "fits",
                gpu ? "per GPU" : "per rank", "params", "grads", "state", "buffers", gpu ? "host" : "per host", "step",
                "compute", "exposed", "update", "post", "bubble+tp", "sent in", "sent out");
    int hidden = 0;
    for (const planner::Plan &p : report.plans) {
        if (!p.fits && !all && report.fitting > 0) {
            ++hidden;
            continue;
        }
        const MemoryStats &m = p.memory;
        std::printf("%-38s %4s %10s %9s %9s %9s %9s %9s | %9s %9s %9s %9s %9s %9s | %9s %9s\n", p.name.c_str(),
                    p.fits ? "yes" : "no", bytes_text(double(p.device_bytes)).c_str(),
                    bytes_text(double(m.params_bytes + m.host_params_bytes)).c_str(),
                    bytes_text(double(m.grads_bytes + m.host_grads_bytes)).c_str(),
                    bytes_text(double(m.optimizer_state_bytes + m.host_optimizer_state_bytes)).c_str(),
                    bytes_text(double(m.buffer_bytes + m.compression_bytes)).c_str(),
                    bytes_text(double(gpu ? p.host_bytes : p.host_total_bytes)).c_str(),
                    seconds_text(p.time.step).c_str(), seconds_text(p.time.compute).c_str(),
                    seconds_text(p.time.exposed_comm).c_str(), seconds_text(p.time.update).c_str(),
                    seconds_text(p.time.post_update).c_str(), seconds_text(p.time.bubble + p.time.tensor_comm).c_str(),
                    bytes_text(double(p.sent_intra)).c_str(), bytes_text(double(p.sent_inter)).c_str());
        if (!p.fits) std::printf("%-38s      %s\n", "", p.why_not.c_str());
    }
    if (hidden > 0) std::printf("(%d more do not fit: --all shows them)\n", hidden);
}

} // namespace

int main(int argc, char **argv) {
    CLI::App app{"shardopt-plan: which strategies fit a model on a cluster, fastest first, with the memory and time "
                 "breakdowns (docs/planning.md)"};
    std::string params, layout_file, profile_file, gpu_memory, host_memory, intra, inter, intra_latency, inter_latency,
        update_bw, gpu_update_bw, pcie, compute, flops_rate, reserve, bucket, optimizer = "adam", dtype_text = "f32",
        compression = "none", schedule = "1f1b";
    std::vector<std::string> strategies;
    int hosts = 0, gpus_per_host = 0, ranks_per_host = 0, cores = 0, layers = 0, hidden = 0, seq = 0, micro_batch = 1;
    int accumulation = 1, staging = 1, micro_batches = 0, max_tp = 0, max_pp = 0;
    double tokens = 0, mfu = 0.4;
    bool as_json = false, all = false, no_prefetch = false, no_offload = false;
    app.add_option("--params", params, "parameters of the model (7e9, 70B, 350M)");
    app.add_option("--layout", layout_file, "the model's tensors as JSON (instead of --params)");
    app.add_option("--layers", layers, "transformer blocks (default: typical for --params)");
    app.add_option("--hidden", hidden, "hidden size (default: typical for --params)");
    app.add_option("--seq", seq, "sequence length (activations between stages and tensor-parallel ranks)");
    app.add_option("--micro-batch", micro_batch, "sequences per micro-batch");
    app.add_option("--profile", profile_file, "a cluster profile (JSON, from ./dev bench calibrate or a datasheet)");
    app.add_option("--hosts", hosts, "hosts");
    app.add_option("--gpus-per-host", gpus_per_host, "GPUs per host (one rank each, CUDA memory)");
    app.add_option("--ranks-per-host", ranks_per_host, "CPU ranks per host (host memory)");
    app.add_option("--cores-per-host", cores, "CPU cores per host");
    app.add_option("--gpu-memory", gpu_memory, "memory of a GPU (80GiB)");
    app.add_option("--host-memory", host_memory, "memory of a host (1TiB)");
    app.add_option("--intra", intra, "bandwidth between the ranks of a host (900GB/s NVLink; a CPU host's copy bandwidth)");
    app.add_option("--intra-latency", intra_latency, "latency between the ranks of a host (2us)");
    app.add_option("--inter", inter, "bandwidth of a host's link to the others (400Gbit/s)");
    app.add_option("--inter-latency", inter_latency, "latency between hosts (10us)");
    app.add_option("--update-bandwidth", update_bw, "a rank's CPU update rate, bytes through memory per second");
    app.add_option("--gpu-update-bandwidth", gpu_update_bw, "a GPU's update rate (its memory bandwidth: 3TB/s)");
    app.add_option("--pcie", pcie, "a GPU's copies to and from host memory (25GB/s)");
    app.add_option("--compute", compute, "forward + backward of one step on one rank (1.5s)");
    app.add_option("--tokens", tokens, "tokens per step (the whole job), with --flops-rate: compute = 6 P tokens / (ranks rate mfu)");
    app.add_option("--flops-rate", flops_rate, "peak FLOP/s of a rank (989e12)");
    app.add_option("--mfu", mfu, "fraction of the peak the model reaches (0.4)");
    app.add_option("--optimizer", optimizer, "sgd, adam, adamw, rmsprop, adagrad, lamb");
    app.add_option("--dtype", dtype_text, "f32 or f64 parameters");
    app.add_option("--strategy", strategies, "strategies to try (ddp, zero1, zero2, fsdp, local_sgd; default all)")->delimiter(',');
    app.add_option("--accumulation", accumulation, "gradient accumulation steps");
    app.add_option("--bucket", bucket, "gradient bucket size (25MiB)");
    app.add_option("--staging-buffers", staging, "ZeRO-2/FSDP gradient staging buffers");
    app.add_flag("--no-prefetch", no_prefetch, "FSDP without prefetch");
    app.add_option("--compression", compression, "gradient compression (bf16, fp16, int8, int4, top_k, power_sgd)");
    app.add_option("--micro-batches", micro_batches, "pipeline micro-batches per step (default 4 x stages)");
    app.add_option("--schedule", schedule, "pipeline schedule: 1f1b, gpipe, interleaved");
    app.add_option("--max-tp", max_tp, "largest tensor-parallel size to try");
    app.add_option("--max-pp", max_pp, "largest pipeline size to try");
    app.add_flag("--no-offload", no_offload, "do not try ZeRO-Offload");
    app.add_option("--reserve", reserve, "memory each rank keeps besides the optimizer's (activations: 10GiB)");
    app.add_flag("--json", as_json, "the plans as JSON");
    app.add_flag("--all", all, "also the strategies that do not fit");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        return app.exit(e) == 0 ? 0 : 2;
    }
    try {
        planner::Cluster c;
        if (!profile_file.empty()) c = planner::cluster_from_json(read_file(profile_file));
        else { // defaults for what is not given: a CPU host's links as a loopback, a GPU's as an H100's
            c.intra = {2e-6, 10e9};
            c.inter = {20e-6, 12.5e9};
            c.update_bandwidth = 10e9;
            c.gpu_update_bandwidth = 2.5e12;
            c.pcie = {10e-6, 25e9};
        }
        for (const char *count : {"--hosts", "--gpus-per-host", "--ranks-per-host", "--cores-per-host"})
            if (app.count(count) > 0 && app.get_option(count)->as<int>() < 1)
                throw Error(ErrorCode::invalid_argument, std::string(count) + " must be >= 1");
        if (hosts != 0) c.hosts = hosts;
        if (gpus_per_host != 0 && ranks_per_host != 0)
            throw Error(ErrorCode::invalid_argument, "--gpus-per-host and --ranks-per-host: give one");
        if (gpus_per_host != 0) {
            c.ranks_per_host = gpus_per_host;
            c.memory = MemorySpace::cuda;
        }
        if (ranks_per_host != 0) {
            c.ranks_per_host = ranks_per_host;
            c.memory = MemorySpace::host;
        }
        if (hosts < 0 || gpus_per_host < 0 || ranks_per_host < 0)
            throw Error(ErrorCode::invalid_argument, "hosts and ranks per host must be >= 1");
        if (cores != 0) c.cores_per_host = cores;
        if (!gpu_memory.empty()) c.device_memory = std::uint64_t(parse_bytes(gpu_memory));
        if (!host_memory.empty()) c.host_memory = std::uint64_t(parse_bytes(host_memory));
        if (!intra.empty()) c.intra.bandwidth = parse_rate(intra);
        if (!inter.empty()) c.inter.bandwidth = parse_rate(inter);
        if (!intra_latency.empty()) c.intra.latency = parse_seconds(intra_latency);
        if (!inter_latency.empty()) c.inter.latency = parse_seconds(inter_latency);
        if (!update_bw.empty()) c.update_bandwidth = parse_rate(update_bw);
        if (!gpu_update_bw.empty()) c.gpu_update_bandwidth = parse_rate(gpu_update_bw);
        if (!pcie.empty()) c.pcie.bandwidth = parse_rate(pcie);
        if (c.memory == MemorySpace::cuda && c.device_memory == 0)
            throw Error(ErrorCode::invalid_argument, "GPUs need --gpu-memory (80GiB)");
        planner::validate_cluster(c);

        planner::ModelSpec model;
        planner::RunSpec run;
        if (dtype_text != "f32" && dtype_text != "f64") throw Error(ErrorCode::invalid_argument, "--dtype: f32 or f64");
        run.dtype = dtype_text == "f64" ? DType::f64 : DType::f32;
        if (!layout_file.empty() && !params.empty()) throw Error(ErrorCode::invalid_argument, "--params and --layout: give one");
        if (!layout_file.empty()) model.layout = layout_from_json(layout_file, run.dtype);
        else if (!params.empty()) model.parameters = parse_count(params);
        else throw Error(ErrorCode::invalid_argument, "the model: --params or --layout");
        model.layers = layers;
        model.hidden = hidden;
        model.sequence = seq;
        model.micro_batch = micro_batch;
        if (layers < 0 || hidden < 0 || seq < 0 || micro_batch < 1)
            throw Error(ErrorCode::invalid_argument, "--layers, --hidden, --seq must be >= 0, --micro-batch >= 1");
        bool known = false;
        for (OptimizerKind k : {OptimizerKind::sgd, OptimizerKind::adam, OptimizerKind::adamw, OptimizerKind::rmsprop,
                                OptimizerKind::adagrad, OptimizerKind::lamb})
            if (optimizer == optimizer_kind_name(k)) {
                run.optimizer = OptimizerOptions::defaults(k);
                known = true;
            }
        if (!known) throw Error(ErrorCode::invalid_argument, "unknown optimizer '" + optimizer + "'");
        double P = model.parameters;
        if (P <= 0)
            for (const TensorLayout &t : model.layout.tensors()) P += double(t.count);
        if (!compute.empty()) run.compute_seconds = parse_seconds(compute);
        else if (tokens > 0 && !flops_rate.empty()) {
            const double rate = parse_count(flops_rate);
            if (!(rate > 0) || !(mfu > 0 && mfu <= 1)) throw Error(ErrorCode::invalid_argument, "--flops-rate > 0, --mfu in (0, 1]");
            run.compute_seconds = 6.0 * P * tokens / (double(c.ranks()) * rate * mfu);
        }
        run.tokens_per_step = tokens;
        for (const std::string &s : strategies) run.strategies.push_back(strategy_of(s));
        run.base.gradient_accumulation_steps = accumulation;
        run.base.staging_buffers = staging;
        run.base.fsdp_prefetch = !no_prefetch;
        run.base.compression.method = compression_of(compression);
        if (!bucket.empty()) {
            const double b = parse_bytes(bucket);
            if (!(b >= 1)) throw Error(ErrorCode::invalid_argument, "--bucket must be >= 1 byte");
            run.base.parameter_group_size = std::size_t(b / double(run.dtype == DType::f64 ? 8 : 4));
        }
        run.micro_batches = micro_batches;
        if (schedule == "1f1b") run.schedule = PipelineSchedule::one_f_one_b;
        else if (schedule == "gpipe") run.schedule = PipelineSchedule::gpipe;
        else if (schedule == "interleaved") run.schedule = PipelineSchedule::interleaved_1f1b;
        else throw Error(ErrorCode::invalid_argument, "--schedule: 1f1b, gpipe or interleaved");
        run.max_tensor_parallel = max_tp;
        run.max_pipeline_parallel = max_pp;
        run.try_offload = !no_offload;
        if (!reserve.empty()) run.reserve_bytes = std::uint64_t(parse_bytes(reserve));
        if (accumulation < 1 || staging < 1 || micro_batches < 0 || max_tp < 0 || max_pp < 0)
            throw Error(ErrorCode::invalid_argument, "--accumulation and --staging-buffers >= 1, the others >= 0");

        const planner::PlanReport report = planner::plan(model, c, run);
        if (as_json) {
            json out{{"cluster", json::parse(planner::cluster_to_json(c))},
                     {"parameters", P},
                     {"compute_seconds", run.compute_seconds},
                     {"fitting", report.fitting},
                     {"plans", json::array()}};
            for (const planner::Plan &p : report.plans) out["plans"].push_back(plan_json(p));
            std::cout << out.dump(2) << "\n";
        } else {
            std::printf("shardopt-plan: %.3g parameters (%s, %s), %d host%s x %d %s%s; intra %s, inter %s; compute %s "
                        "per step\n",
                        P, dtype_text.c_str(), optimizer.c_str(), c.hosts, c.hosts == 1 ? "" : "s", c.ranks_per_host,
                        c.memory == MemorySpace::cuda ? "GPUs" : "ranks",
                        c.memory == MemorySpace::cuda ? (" (" + bytes_text(double(c.device_memory)) + " each)").c_str() : "",
                        rate_text(c.intra.bandwidth).c_str(), rate_text(c.inter.bandwidth).c_str(),
                        seconds_text(run.compute_seconds).c_str());
            print_table(report, c, all);
        }
        if (report.fitting == 0) {
            const planner::Plan &best = *std::min_element(
                report.plans.begin(), report.plans.end(),
                [](const planner::Plan &a, const planner::Plan &b) { return a.device_bytes < b.device_bytes; });
            std::fprintf(stderr,
                         "shardopt-plan: the model fits nowhere: the least any strategy needs is %s (%s: %s); add "
                         "hosts or memory, or lower the reserve\n",
                         bytes_text(double(best.device_bytes)).c_str(), best.name.c_str(), best.why_not.c_str());
            return 2;
        }
        return 0;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "shardopt-plan: %s\n", e.what());
        return 2;
    }
}

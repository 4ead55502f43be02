// The planner's calibration and validation (bench/calibrate.sh, bench/planner.sh; docs/planning.md).
// Launched with tools/shardopt-run (or in network namespaces); every figure is the slowest rank's.
//
//   --mode allreduce --bytes N [--iters K]   allreduce of N bytes over the world: min and median
//                                            seconds (calibration fits alpha and beta from these)
//   --mode update --params N                 one rank's Adam update (in-process, 1 rank): seconds
//                                            and bytes through memory per second (28 B/param)
//   --mode step --strategy S --profile P     a synthetic training step (a sleep per bucket stands
//                                            in for forward and backward, as bench_training's
//                                            overlap mode), measured, and what the planner predicts
//                                            for it from the profile P; also the allreduce of the
//                                            whole model measured and predicted
// Each result is one line: name=... key=value ...
#include <getopt.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "shardopt/error.hpp"
#include "shardopt/inprocess.hpp"
#include "shardopt/planner.hpp"
#include "shardopt/sharded_optimizer.hpp"
#include "shardopt/ucx.hpp"

using namespace shardopt;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
    std::string mode = "step";
    Strategy strategy = Strategy::ddp;
    double bytes = 64 << 20;
    double params = 16e6;
    int iters = 5;
    int buckets = 8;
    double bucket_mb = 4;
    double compute_ms = 200;
    int hosts = 1;
    std::string profile;
};

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double max_over_ranks(Communicator &comm, double v) {
    comm.allreduce(&v, &v, 1, DType::f64, ReduceOp::max);
    return v;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Min and median over iterations of the slowest rank's time of fn().
template <typename Fn> std::pair<double, double> timed(Communicator &comm, int iters, const Fn &fn) {
    std::vector<double> t;
    fn(); // warm up
    for (int i = 0; i < iters; ++i) {
        comm.barrier();
        const auto start = Clock::now();
        fn();
        t.push_back(max_over_ranks(comm, seconds_since(start)));
    }
    return {*std::min_element(t.begin(), t.end()), median(t)};
}

void allreduce(Communicator &comm, const Args &a) {
    const std::size_t count = std::max<std::size_t>(1, std::size_t(a.bytes / 4));
    std::vector<float> buf(count, 1.0f);
    const auto [best, med] = timed(comm, a.iters, [&] { comm.allreduce(buf.data(), buf.data(), count, DType::f32, ReduceOp::sum); });
    if (comm.rank() == 0)
        std::printf("name=allreduce ranks=%d bytes=%zu min_s=%.6g median_s=%.6g\n", comm.size(), count * 4, best, med);
}

void update(const Args &a) {
    const std::size_t n = std::size_t(a.params);
    ParameterSet layout(DType::f32);
    layout.add("w", n);
    auto comm = make_inprocess_group(1)[0];
    auto opt = ShardedOptimizer::create(comm, layout, OptimizerOptions::defaults(OptimizerKind::adam), ShardingOptions{});
    std::vector<double> t;
    for (int i = 0; i < a.iters + 1; ++i) {
        opt->zero_grad();
        std::fill_n(static_cast<float *>(opt->bucket_grad(0)), n, 1e-3f);
        opt->grad_ready(0);
        const StepResult r = opt->step();
        if (i > 0) t.push_back(r.update_seconds);
    }
    const double s = median(t), bytes = 28.0 * double(n); // Adam: p, g, m, v read; p, m, v written
    std::printf("name=update params=%zu median_s=%.6g bytes_per_s=%.6g\n", n, s, bytes / s);
}

std::string read_file(const std::string &path) {
    std::ifstream in(path);
    require(bool(in), ErrorCode::invalid_argument, "cannot read " + path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

void step(Communicator &comm, const Args &a) {
    const std::size_t per_bucket = std::size_t(a.bucket_mb * (1 << 20) / 4);
    ParameterSet layout(DType::f32, per_bucket * 4);
    for (int b = 0; b < a.buckets; ++b) {
        layout.add("layer" + std::to_string(b), per_bucket);
        layout.end_bucket();
    }
    ShardingOptions o; // the library's defaults: one staging buffer, prefetch, no overlap of the gather
    o.strategy = a.strategy;
    const OptimizerOptions adam = OptimizerOptions::defaults(OptimizerKind::adam);
    auto opt = ShardedOptimizer::create(comm.shared_from_this(), layout, adam, o);
    const auto half = std::chrono::microseconds(long(a.compute_ms * 1000 / 2 / a.buckets));
    auto iteration = [&](bool compute, bool communicate) {
        for (int b = 0; b < a.buckets; ++b) { // forward
            if (communicate) opt->gather(b);
            if (compute) std::this_thread::sleep_for(half);
            if (communicate) opt->release(b);
        }
        if (communicate) opt->zero_grad();
        for (int b = a.buckets - 1; b >= 0; --b) { // backward
            if (communicate) opt->gather(b);
            if (compute) std::this_thread::sleep_for(half);
            if (!communicate) continue;
            static_cast<float *>(opt->bucket_grad(b))[0] = 1e-3f;
            opt->grad_ready(b);
            opt->release(b);
        }
        if (communicate) opt->step();
    };
    // The compute alone (what the sleeps take here: the planner's input), the communication and
    // update alone, and the step.
    [[maybe_unused]] const auto [compute_min, compute_med] = timed(comm, a.iters, [&] { iteration(true, false); });
    [[maybe_unused]] const auto [comm_min, comm_med] = timed(comm, a.iters, [&] { iteration(false, true); });
    const auto [step_min, step_med] = timed(comm, a.iters, [&] { iteration(true, true); });
    // The allreduce of the whole model, as DDP's buckets would be if they were one.
    const std::size_t count = per_bucket * std::size_t(a.buckets);
    std::vector<float> buf(count, 1.0f);
    const auto [ar_min, ar_med] = timed(comm, a.iters, [&] { comm.allreduce(buf.data(), buf.data(), count, DType::f32, ReduceOp::sum); });

    planner::Cluster cluster = planner::cluster_from_json(read_file(a.profile));
    cluster.hosts = a.hosts;
    cluster.ranks_per_host = comm.size() / a.hosts;
    planner::ModelSpec model;
    model.layout = layout;
    planner::RunSpec run;
    run.optimizer = adam;
    run.compute_seconds = compute_min;
    run.backward_share = 0.5;
    const planner::Plan p = planner::evaluate(model, cluster, run, o);
    run.compute_seconds = 0.0;
    const planner::Plan alone = planner::evaluate(model, cluster, run, o);
    run.compute_seconds = compute_min;
    const double ar_pred = planner::collective_seconds(cluster, "allreduce", count * 4, cluster.hosts, cluster.ranks_per_host);
    if (comm.rank() == 0)
        std::printf("name=step strategy=%s ranks=%d hosts=%d buckets=%d bucket_bytes=%zu compute_s=%.4f "
                    "measured_comm_s=%.4f predicted_comm_s=%.4f "
                    "measured_step_s=%.4f measured_step_median_s=%.4f predicted_step_s=%.4f step_ratio=%.3f "
                    "predicted_exposed_s=%.4f predicted_update_s=%.4f predicted_post_s=%.4f "
                    "measured_allreduce_s=%.4f measured_allreduce_median_s=%.4f predicted_allreduce_s=%.4f "
                    "allreduce_ratio=%.3f\n",
                    strategy_name(a.strategy), comm.size(), a.hosts, a.buckets, per_bucket * 4, run.compute_seconds,
                    comm_min, alone.time.step, step_min, step_med, p.time.step, p.time.step / step_min, p.time.exposed_comm, p.time.update,
                    p.time.post_update, ar_min, ar_med, ar_pred, ar_pred / ar_min);
}

Strategy parse_strategy(const std::string &s) {
    for (Strategy k : {Strategy::ddp, Strategy::zero1, Strategy::zero2, Strategy::fsdp})
        if (s == strategy_name(k)) return k;
    throw Error(ErrorCode::invalid_argument, "unknown strategy " + s);
}

} // namespace

int main(int argc, char **argv) {
    Args a;
    static option longs[] = {{"mode", required_argument, nullptr, 'm'},    {"strategy", required_argument, nullptr, 's'},
                             {"bytes", required_argument, nullptr, 'b'},   {"params", required_argument, nullptr, 'p'},
                             {"iters", required_argument, nullptr, 'i'},   {"buckets", required_argument, nullptr, 'k'},
                             {"bucket-mb", required_argument, nullptr, 'B'}, {"compute-ms", required_argument, nullptr, 'c'},
                             {"hosts", required_argument, nullptr, 'H'},   {"profile", required_argument, nullptr, 'P'},
                             {nullptr, 0, nullptr, 0}};
    for (int ch; (ch = getopt_long(argc, argv, "", longs, nullptr)) != -1;) {
        switch (ch) {
        case 'm': a.mode = optarg; break;
        case 's': a.strategy = parse_strategy(optarg); break;
        case 'b': a.bytes = std::stod(optarg); break;
        case 'p': a.params = std::stod(optarg); break;
        case 'i': a.iters = std::stoi(optarg); break;
        case 'k': a.buckets = std::stoi(optarg); break;
        case 'B': a.bucket_mb = std::stod(optarg); break;
        case 'c': a.compute_ms = std::stod(optarg); break;
        case 'H': a.hosts = std::stoi(optarg); break;
        case 'P': a.profile = optarg; break;
        default: return 2;
        }
    }
    try {
        if (a.mode == "update") {
            update(a);
            return 0;
        }
        CommunicatorPtr comm = create_communicator_from_env("ucx");
        if (a.mode == "allreduce") allreduce(*comm, a);
        else if (a.mode == "step") step(*comm, a);
        else throw Error(ErrorCode::invalid_argument, "unknown mode " + a.mode);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "bench_planner: %s\n", e.what());
        return 1;
    }
    return 0;
}

// Training benchmarks over real processes (launch with tools/shardopt-run; see bench/training.sh).
//
//   --mode overlap : a synthetic forward and backward that spend a fixed compute time per
//                    bucket (a sleep, standing in for accelerator work that leaves the CPU free),
//                    measured three ways in one run: compute alone, communication alone, and
//                    both overlapped (reductions through grad_ready(), ZeRO's parameter
//                    allgather through the next forward). Prints the iteration time against
//                    max(compute, communication) + update.
//   --mode demo    : samples/s of the demo MLP and the split of a step into compute,
//                    communication and update.
//   --mode scale   : a large f32 Adam model under FSDP, printing each rank's peak RSS against
//                    16 bytes/param / ranks + the gathered units + 10%; then the same model
//                    under DDP, which must be refused up front with an estimate.
// Each result is one line: name=... key=value ...
#include <getopt.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "mlp.hpp"
#include "shardopt/batch_split.hpp"
#include "shardopt/error.hpp"
#include "shardopt/sharded_optimizer.hpp"
#include "shardopt/ucx.hpp"

using namespace shardopt;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
    std::string mode = "overlap";
    Strategy strategy = Strategy::ddp;
    int buckets = 8;
    double bucket_mb = 4;
    double compute_ms = 20;
    int steps = 5;
    double params = 1e9;
    int units = 40;
    int epochs = 3;
};

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

Strategy parse_strategy(const std::string &s) {
    for (Strategy k : {Strategy::ddp, Strategy::zero1, Strategy::zero2, Strategy::fsdp})
        if (s == strategy_name(k)) return k;
    throw Error(ErrorCode::invalid_argument, "unknown strategy " + s);
}

// The largest value over ranks: a step is as slow as its slowest rank.
double max_over_ranks(Communicator &comm, double v) {
    comm.allreduce(&v, &v, 1, DType::f64, ReduceOp::max);
    return v;
}

void overlap(Communicator &comm, const Args &a) {
    const std::size_t per_bucket = std::size_t(a.bucket_mb * (1 << 20) / 4);
    ParameterSet layout(DType::f32, per_bucket * 4);
    for (int b = 0; b < a.buckets; ++b) layout.add("layer" + std::to_string(b), per_bucket);
    ShardingOptions o;
    o.strategy = a.strategy;
    o.staging_buffers = a.buckets;   // every bucket in flight at once: full overlap
    o.overlap_param_gather = true;   // ZeRO: the parameter allgather overlaps the next forward
    auto sgd = OptimizerOptions::defaults(OptimizerKind::sgd);
    auto opt = ShardedOptimizer::create(comm.shared_from_this(), layout, sgd, o);
    // One iteration: forward (gather(b), then compute, per bucket), backward (compute, then
    // grad_ready(b), in reverse), step. Compute is split evenly between forward and backward.
    const auto half = std::chrono::microseconds(long(a.compute_ms * 500));
    StepResult r;
    auto iteration = [&](bool with_compute, bool with_comm) {
        for (int b = 0; b < a.buckets; ++b) {
            if (with_comm) opt->gather(b);
            if (with_compute) std::this_thread::sleep_for(half);
        }
        opt->zero_grad();
        for (int b = a.buckets - 1; b >= 0; --b) {
            if (with_compute) std::this_thread::sleep_for(half);
            if (with_comm) {
                static_cast<float *>(opt->bucket_grad(b))[0] = 1e-3f;
                opt->grad_ready(b);
            }
        }
        if (with_comm) r = opt->step();
    };
    auto timed = [&](bool with_compute, bool with_comm) {
        comm.barrier();
        opt->parameters(); // nothing in flight at the start
        const auto t = Clock::now();
        for (int i = 0; i < a.steps; ++i) iteration(with_compute, with_comm);
        opt->parameters(); // ... nor at the end: every allgather is counted
        return max_over_ranks(comm, seconds_since(t)) / a.steps;
    };
    iteration(true, true); // warm up connections and buffers
    double compute_s = 1e30, comm_s = 1e30, step_s = 1e30, update_s = 1e30;
    for (int round = 0; round < 3; ++round) {
        compute_s = std::min(compute_s, timed(true, false));
        const double comm_and_update = timed(false, true);
        update_s = std::min(update_s, max_over_ranks(comm, r.update_seconds));
        comm_s = std::min(comm_s, comm_and_update - r.update_seconds);
        step_s = std::min(step_s, timed(true, true));
    }
    const double ideal = std::max(compute_s, comm_s) + update_s;
    if (comm.rank() == 0)
        std::printf("name=overlap strategy=%s ranks=%d buckets=%d bucket_bytes=%zu compute_s=%.4f comm_s=%.4f "
                    "update_s=%.4f iteration_s=%.4f ratio=%.3f target=1.15 met=%s\n",
                    strategy_name(a.strategy), comm.size(), a.buckets, per_bucket * 4, compute_s, comm_s, update_s,
                    step_s, step_s / ideal, step_s / ideal <= 1.15 ? "yes" : "no");
}

void demo(Communicator &comm, const Args &a) {
    const examples::MlpShape shape{64, 256, 10};
    const std::int64_t samples = 8192, batch = 1024;
    const auto data = examples::make_blobs(samples, shape.inputs, shape.classes);
    const auto init = examples::mlp_init<float>(shape);
    ParameterSet layout(DType::f32);
    for (auto &[name, count] : examples::mlp_tensors(shape)) layout.add(name, count);
    ShardingOptions o;
    o.strategy = a.strategy;
    auto opt = ShardedOptimizer::create(comm.shared_from_this(), layout, OptimizerOptions::defaults(OptimizerKind::adam),
                                        o, init.data());
    std::vector<float> params(init.size()), grad(init.size());
    std::vector<std::int64_t> idx;
    double compute = 0, comm_s = 0, update = 0;
    const auto start = Clock::now();
    for (int e = 0; e < a.epochs; ++e)
        for (std::int64_t b0 = 0; b0 < samples; b0 += batch) {
            idx = batch_slice(b0, batch, comm.rank(), comm.size()).indices();
            auto t = Clock::now();
            opt->get_parameters(params.data());
            examples::mlp_loss_grad<float>(shape, data, params.data(), grad.data(), idx.data(), idx.size());
            compute += seconds_since(t);
            t = Clock::now();
            opt->zero_grad();
            std::memcpy(opt->bucket_grad(0), grad.data(), grad.size() * sizeof(float));
            opt->grad_ready(0);
            const StepResult r = opt->step();
            const double step_total = seconds_since(t);
            update += r.update_seconds;
            comm_s += step_total - r.update_seconds;
        }
    const double total = max_over_ranks(comm, seconds_since(start));
    compute = max_over_ranks(comm, compute);
    comm_s = max_over_ranks(comm, comm_s);
    update = max_over_ranks(comm, update);
    if (comm.rank() == 0)
        std::printf("name=demo strategy=%s ranks=%d params=%zu samples_per_s=%.0f compute_s=%.3f comm_s=%.3f "
                    "update_s=%.3f total_s=%.3f\n",
                    strategy_name(a.strategy), comm.size(), init.size(), double(samples * a.epochs) / total, compute,
                    comm_s, update, total);
}

std::size_t peak_rss_bytes() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return std::size_t(u.ru_maxrss) * 1024;
}

void scale(Communicator &comm, const Args &a) {
    const std::size_t per_unit = std::size_t(a.params / a.units);
    ParameterSet layout(DType::f32);
    for (int u = 0; u < a.units; ++u) {
        layout.add("unit" + std::to_string(u), per_unit);
        layout.end_bucket();
    }
    const std::size_t total = per_unit * std::size_t(a.units);
    ShardingOptions o;
    o.strategy = Strategy::fsdp;
    const auto adam = OptimizerOptions::defaults(OptimizerKind::adam);
    {
        auto opt = ShardedOptimizer::create(comm.shared_from_this(), layout, adam, o);
        const auto start = Clock::now();
        for (int s = 0; s < a.steps; ++s) {
            for (int u = 0; u < a.units; ++u) { // forward
                opt->gather(u);
                opt->release(u);
            }
            opt->zero_grad();
            for (int u = a.units - 1; u >= 0; --u) { // backward
                opt->gather(u);
                auto *g = static_cast<float *>(opt->bucket_grad(u));
                std::fill(g, g + per_unit, 1e-4f);
                opt->grad_ready(u);
                opt->release(u);
            }
            opt->step();
        }
        const double step_s = max_over_ranks(comm, seconds_since(start)) / a.steps;
        const double unit_bytes = double(per_unit) * 4;
        const double bound = (16.0 * double(total) / comm.size() + 2 * unit_bytes) * 1.10;
        const std::size_t rss = peak_rss_bytes();
        double worst = double(rss);
        comm.allreduce(&worst, &worst, 1, DType::f64, ReduceOp::max);
        std::printf("name=scale strategy=fsdp rank=%d ranks=%d params=%zu peak_rss_GB=%.2f bound_GB=%.2f step_s=%.1f "
                    "met=%s\n",
                    comm.rank(), comm.size(), total, double(rss) / 1e9, bound / 1e9, step_s,
                    double(rss) <= bound ? "yes" : "no");
        std::fflush(stdout);
    }
    o.strategy = Strategy::ddp;
    try {
        ShardedOptimizer::create(comm.shared_from_this(), layout, adam, o);
        if (comm.rank() == 0) std::printf("name=scale strategy=ddp refused=no\n");
    } catch (const Error &e) {
        if (comm.rank() == 0) std::printf("name=scale strategy=ddp refused=yes message=\"%s\"\n", e.what());
    }
}

} // namespace

int main(int argc, char **argv) {
    Args a;
    static const option opts[] = {{"mode", required_argument, nullptr, 'm'},
                                   {"strategy", required_argument, nullptr, 's'},
                                   {"buckets", required_argument, nullptr, 'b'},
                                   {"bucket-mb", required_argument, nullptr, 'B'},
                                   {"compute-ms", required_argument, nullptr, 'c'},
                                   {"steps", required_argument, nullptr, 'n'},
                                   {"params", required_argument, nullptr, 'p'},
                                   {"units", required_argument, nullptr, 'u'},
                                   {"epochs", required_argument, nullptr, 'e'},
                                   {nullptr, 0, nullptr, 0}};
    try {
        for (int c; (c = getopt_long(argc, argv, "", opts, nullptr)) != -1;) {
            switch (c) {
            case 'm': a.mode = optarg; break;
            case 's': a.strategy = parse_strategy(optarg); break;
            case 'b': a.buckets = std::stoi(optarg); break;
            case 'B': a.bucket_mb = std::stod(optarg); break;
            case 'c': a.compute_ms = std::stod(optarg); break;
            case 'n': a.steps = std::stoi(optarg); break;
            case 'p': a.params = std::stod(optarg); break;
            case 'u': a.units = std::stoi(optarg); break;
            case 'e': a.epochs = std::stoi(optarg); break;
            default: std::fprintf(stderr, "bench_training: bad option\n"); return 2;
            }
        }
        auto comm = create_communicator_from_env();
        if (a.mode == "overlap") overlap(*comm, a);
        else if (a.mode == "demo") demo(*comm, a);
        else if (a.mode == "scale") scale(*comm, a);
        else throw Error(ErrorCode::invalid_argument, "unknown mode " + a.mode);
        return 0;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "bench_training: %s\n", e.what());
        return 1;
    }
}

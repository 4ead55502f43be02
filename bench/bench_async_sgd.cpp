// Asynchronous SGD against synchronous DDP with a straggler (bench/async_sgd.sh).
//
// Trains an MLP classifier through optimize() twice on the same ranks: DDP, then async_sgd at
// the given staleness. Each model callback computes the MLP's loss and gradient and then sleeps
// --compute-ms, standing in for accelerator work that leaves the CPU free (as bench_training's
// overlap mode does; 0 leaves only the CPU's work, which then competes for the host's cores);
// one rank is slowed --slow-factor times by a further sleep of (factor - 1) x the time its call
// took so far. Prints, for each run, the steps per second of every rank and the mean of the fast
// ranks, and the loss of the final parameters over the whole data set; then the two ratios (fast
// ranks' steps/s async / DDP, final loss async / DDP).
//
//   bench_async_sgd [--backend inprocess|ucx] [--ranks N] [--staleness S] [--slow-rank R]
//                   [--slow-factor F] [--compute-ms MS] [--epochs E] [--samples N] [--batch B]
//                   [--hidden H]
//   tools/shardopt-run -n 4 -- bench_async_sgd --backend ucx
#include <getopt.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "mlp.hpp"
#include "shardopt/async_sgd.hpp"
#include "shardopt/error.hpp"
#include "shardopt/inprocess.hpp"
#include "shardopt/sharded_optimizer.hpp"
#include "shardopt/ucx.hpp"

using namespace shardopt;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
    std::string backend = "inprocess";
    int ranks = 4;
    int staleness = 4;
    int slow_rank = -1; // -1: the last rank
    double slow_factor = 3.0;
    double compute_ms = 4.0;
    int epochs = 4;
    std::int64_t samples = 8192;
    std::int64_t batch = 256;
    int hidden = 64;
};

struct Run {
    double steps_per_second = 0; // this rank
    double final_loss = 0;
    double seconds = 0;
    std::int64_t steps = 0;
    AsyncSgdStats stats;
};

Run train(Communicator &comm, const Args &a, Strategy strategy, int slow_rank) {
    const examples::MlpShape shape{32, a.hidden, 8};
    const auto data = examples::make_blobs(std::size_t(a.samples), shape.inputs, shape.classes);
    const auto init = examples::mlp_init<float>(shape);
    ParameterSet layout(DType::f32);
    int t = 0;
    for (auto &[name, count] : examples::mlp_tensors(shape)) {
        layout.add(name, count);
        if (++t == 2) layout.end_bucket();
    }
    ShardingOptions options;
    options.strategy = strategy;
    options.async_staleness = strategy == Strategy::async_sgd ? a.staleness : 0;
    auto adam = OptimizerOptions::defaults(OptimizerKind::adam);
    adam.lr = 1e-3;
    auto opt = ShardedOptimizer::create(comm.shared_from_this(), layout, adam, options, init.data());
    const bool slow = comm.rank() == slow_rank;
    std::int64_t calls = 0;
    ModelFunction model = [&](const void *params, void *grad, const std::int64_t *samples, std::size_t n) {
        ++calls;
        const auto t0 = Clock::now();
        const double loss = examples::mlp_loss_grad<float>(shape, data, static_cast<const float *>(params),
                                                           static_cast<float *>(grad), samples, n);
        if (a.compute_ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(a.compute_ms));
        if (slow) std::this_thread::sleep_for((Clock::now() - t0) * (a.slow_factor - 1.0));
        return loss;
    };
    OptimizeOptions o;
    o.num_samples = a.samples;
    o.batch_size = a.batch;
    o.epochs = a.epochs;
    o.shuffle = true;
    o.seed = 1;
    comm.barrier(); // both runs start together
    const auto t0 = Clock::now();
    opt->optimize(model, o);
    Run r;
    r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    r.steps = calls;
    r.steps_per_second = double(calls) / r.seconds;
    if (opt->async_sgd()) r.stats = opt->async_sgd()->stats();
    std::vector<float> params(init.size()), grad(init.size());
    opt->get_parameters(params.data());
    std::vector<std::int64_t> all(static_cast<std::size_t>(a.samples));
    std::iota(all.begin(), all.end(), std::int64_t(0));
    r.final_loss = examples::mlp_loss_grad<float>(shape, data, params.data(), grad.data(), all.data(), all.size());
    return r;
}

// Rank 0 prints the run: each rank's steps/s (gathered), the fast ranks' mean.
double report(Communicator &comm, const char *name, const Run &r, int slow_rank) {
    std::vector<double> rates(std::size_t(comm.size()));
    comm.allgather(&r.steps_per_second, rates.data(), 1, DType::f64);
    double fast = 0;
    int n = 0;
    for (int k = 0; k < comm.size(); ++k)
        if (k != slow_rank) fast += rates[std::size_t(k)], ++n;
    fast /= std::max(1, n);
    if (comm.rank() == 0) {
        std::printf("%-22s steps/s per rank:", name);
        for (int k = 0; k < comm.size(); ++k) std::printf(" %8.1f%s", rates[std::size_t(k)], k == slow_rank ? "*" : "");
        std::printf("   fast ranks %8.1f   final loss %.5f   %.2f s\n", fast, r.final_loss, r.seconds);
        if (r.stats.updates > 0)
            std::printf("%-22s updates %lld, late gradients %lld, clocks skipped %lld, max staleness %d, max lead %d\n", "",
                        (long long)r.stats.updates, (long long)r.stats.late_gradients,
                        (long long)r.stats.skipped_clocks, r.stats.max_staleness, r.stats.max_lead);
    }
    return fast;
}

void bench(Communicator &comm, const Args &a) {
    const int slow_rank = a.slow_rank < 0 ? comm.size() - 1 : a.slow_rank;
    if (comm.rank() == 0)
        std::printf("async SGD vs DDP: %d ranks (%s), rank %d slowed %.1fx, MLP 32-%d-8 over Adam + %.1f ms of "
                    "simulated device work per step, %lld samples, batch %lld, %d epochs (%lld clocks)\n",
                    comm.size(), comm.backend_name().c_str(), slow_rank, a.slow_factor, a.hidden, a.compute_ms,
                    (long long)a.samples, (long long)a.batch, a.epochs,
                    (long long)(a.epochs * ((a.samples + a.batch - 1) / a.batch)));
    const Run ddp = train(comm, a, Strategy::ddp, slow_rank);
    const double ddp_fast = report(comm, "ddp", ddp, slow_rank);
    const Run async = train(comm, a, Strategy::async_sgd, slow_rank);
    const std::string name = "async_sgd staleness " + std::to_string(a.staleness);
    const double async_fast = report(comm, name.c_str(), async, slow_rank);
    if (comm.rank() == 0)
        std::printf("fast ranks' steps/s, async / ddp: %.2fx   final loss, async / ddp: %.4f\n", async_fast / ddp_fast,
                    async.final_loss / ddp.final_loss);
}

} // namespace

int main(int argc, char **argv) {
    Args a;
    static const option long_options[] = {{"backend", required_argument, nullptr, 'b'},
                                          {"ranks", required_argument, nullptr, 'n'},
                                          {"staleness", required_argument, nullptr, 's'},
                                          {"slow-rank", required_argument, nullptr, 'r'},
                                          {"slow-factor", required_argument, nullptr, 'f'},
                                          {"compute-ms", required_argument, nullptr, 'c'},
                                          {"epochs", required_argument, nullptr, 'e'},
                                          {"samples", required_argument, nullptr, 'm'},
                                          {"batch", required_argument, nullptr, 'B'},
                                          {"hidden", required_argument, nullptr, 'H'},
                                          {nullptr, 0, nullptr, 0}};
    try {
        for (int c; (c = getopt_long(argc, argv, "", long_options, nullptr)) != -1;) {
            switch (c) {
            case 'b': a.backend = optarg; break;
            case 'n': a.ranks = std::stoi(optarg); break;
            case 's': a.staleness = std::stoi(optarg); break;
            case 'r': a.slow_rank = std::stoi(optarg); break;
            case 'f': a.slow_factor = std::stod(optarg); break;
            case 'c': a.compute_ms = std::stod(optarg); break;
            case 'e': a.epochs = std::stoi(optarg); break;
            case 'm': a.samples = std::stoll(optarg); break;
            case 'B': a.batch = std::stoll(optarg); break;
            case 'H': a.hidden = std::stoi(optarg); break;
            default:
                std::fprintf(stderr,
                             "usage: %s [--backend inprocess|ucx] [--ranks N] [--staleness S] [--slow-rank R] "
                             "[--slow-factor F] [--compute-ms MS] [--epochs E] [--samples N] [--batch B] [--hidden H]\n",
                             argv[0]);
                return 2;
            }
        }
        require(a.slow_factor >= 1.0, ErrorCode::invalid_argument, "--slow-factor must be >= 1");
        require(a.compute_ms >= 0.0, ErrorCode::invalid_argument, "--compute-ms must be >= 0");
        if (a.backend == "inprocess") run_inprocess(a.ranks, [&](Communicator &comm) { bench(comm, a); });
        else bench(*create_communicator_from_env(a.backend), a);
        return 0;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "bench_async_sgd: %s\n", e.what());
        return 1;
    }
}

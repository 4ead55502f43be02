// The f64 reference the language bindings are compared with, bit for bit: the linear model of
// the porting programs (bindings/README.md, "The reference model") trained by the C++ core's
// optimize() on in-process ranks. Prints the final packed parameters, one per line, as the
// signed 64-bit integer of each double's bits (every language reads that exactly).
//
//   bindings_reference_f64 [--ranks N] [--strategy ddp|zero1|zero2|fsdp] [--epochs E]
//                          [--batch B] [--lr LR] [--shuffle-seed S]
//
// Data (exact in binary, no transcendental functions, so every language computes the same
// bits): n = 64 samples of d = 8 features, x[i][j] = ((7i + 3j) mod 11 - 5) / 8,
// y[i] = (sum over j in order of 0.125 (j + 1) x[i][j]) + 0.25. Parameters: "weight" (8),
// "bias" (1), initially 0. For the samples S of a call (m of them, in the given order):
// err_i = (sum over j in order of weight[j] x[i][j]) + bias - y[i]; loss = (sum over S in
// order of 0.5 err_i^2) / m; grad weight[j] = (sum over S in order of err_i x[i][j]) / m, grad
// bias = (sum over S in order of err_i) / m.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "shardopt/inprocess.hpp"
#include "shardopt/sharded_optimizer.hpp"

using namespace shardopt;

namespace {

constexpr int kSamples = 64, kFeatures = 8;

double feature(int i, int j) { return double((7 * i + 3 * j) % 11 - 5) / 8.0; }

double target(int i) {
    double acc = 0.0;
    for (int j = 0; j < kFeatures; ++j) acc += 0.125 * double(j + 1) * feature(i, j);
    return acc + 0.25;
}

double model(const void *params_raw, void *grad_raw, const std::int64_t *samples, std::size_t m) {
    const auto *p = static_cast<const double *>(params_raw);
    auto *g = static_cast<double *>(grad_raw);
    double loss = 0.0, gw[kFeatures] = {}, gb = 0.0;
    for (std::size_t k = 0; k < m; ++k) {
        const int i = int(samples[k]);
        double pred = 0.0;
        for (int j = 0; j < kFeatures; ++j) pred += p[j] * feature(i, j);
        const double err = pred + p[kFeatures] - target(i);
        loss += 0.5 * err * err;
        for (int j = 0; j < kFeatures; ++j) gw[j] += err * feature(i, j);
        gb += err;
    }
    for (int j = 0; j < kFeatures; ++j) g[j] = gw[j] / double(m);
    g[kFeatures] = gb / double(m);
    return loss / double(m);
}

Strategy strategy_from(const std::string &name) {
    for (Strategy s : {Strategy::ddp, Strategy::zero1, Strategy::zero2, Strategy::fsdp})
        if (name == strategy_name(s)) return s;
    std::fprintf(stderr, "unknown strategy '%s' (ddp, zero1, zero2, fsdp)\n", name.c_str());
    std::exit(2);
}

} // namespace

int main(int argc, char **argv) {
    int ranks = 4, epochs = 5;
    std::int64_t batch = 16;
    double lr = 0.05;
    Strategy strategy = Strategy::fsdp;
    bool shuffle = false;
    std::uint64_t seed = 0;
    for (int a = 1; a + 1 < argc; a += 2) {
        const std::string k = argv[a], v = argv[a + 1];
        if (k == "--ranks") ranks = std::atoi(v.c_str());
        else if (k == "--strategy") strategy = strategy_from(v);
        else if (k == "--epochs") epochs = std::atoi(v.c_str());
        else if (k == "--batch") batch = std::atoll(v.c_str());
        else if (k == "--lr") lr = std::atof(v.c_str());
        else if (k == "--shuffle-seed") shuffle = true, seed = std::strtoull(v.c_str(), nullptr, 10);
        else {
            std::fprintf(stderr, "unknown option %s\n", k.c_str());
            return 2;
        }
    }
    std::vector<double> final_params(kFeatures + 1);
    std::mutex mutex;
    run_inprocess(ranks, [&](Communicator &comm) {
        ParameterSet layout(DType::f64);
        layout.add("weight", kFeatures);
        layout.add("bias", 1);
        OptimizerOptions adam = OptimizerOptions::defaults(OptimizerKind::adam);
        adam.lr = lr;
        ShardingOptions sharding;
        sharding.strategy = strategy;
        auto opt = ShardedOptimizer::create(comm.shared_from_this(), layout, adam, sharding);
        OptimizeOptions run;
        run.num_samples = kSamples;
        run.batch_size = batch;
        run.epochs = epochs;
        run.shuffle = shuffle;
        run.seed = seed;
        opt->optimize(model, run);
        std::vector<double> p(kFeatures + 1);
        opt->get_parameters(p.data());
        std::lock_guard<std::mutex> lock(mutex);
        if (comm.rank() == 0) final_params = p;
    });
    for (double v : final_params) {
        std::int64_t bits = 0;
        std::memcpy(&bits, &v, sizeof bits);
        std::printf("%lld\n", static_cast<long long>(bits));
    }
    return 0;
}

// Gradient compression where bandwidth is the limit: DDP on a large model with almost no compute
// (the gradient is a cheap deterministic function), one run per method on the same ranks. Each
// rank prints, per method, the median step time, the bytes it moved per step as the
// communicators counted them (between every pair of ranks, its host's included), and the bytes
// its host's link sent per step as the kernel counted them (/sys/class/net/eth0, the namespaces'
// link; absent elsewhere); the launcher (bench/compression.sh) runs it in network namespaces
// joined by shaped links.
//   bench_compression [--side N (four N x N matrices)] [--steps N] [--methods none,bf16,int8,top_k,power_sgd]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "shardopt/sharded_optimizer.hpp"
#include "shardopt/ucx.hpp"

using namespace shardopt;

namespace {

GradientCompression method_of(const std::string &name) {
    for (int m = 0; m <= int(GradientCompression::power_sgd); ++m)
        if (name == compression_name(GradientCompression(m))) return GradientCompression(m);
    std::fprintf(stderr, "bench_compression: unknown method '%s'\n", name.c_str());
    std::exit(2);
}

// Bytes the host's link has sent so far (its network namespace's eth0), or 0 where there is none.
std::uint64_t link_tx_bytes() {
    std::ifstream in("/sys/class/net/eth0/statistics/tx_bytes");
    std::uint64_t bytes = 0;
    in >> bytes;
    return bytes;
}

} // namespace

int main(int argc, char **argv) {
    std::size_t side = 1024; // four side x side matrices: 16 MiB of f32 gradients
    int steps = 6;
    std::string methods = "none,bf16,int8,top_k,power_sgd";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--side")) side = std::size_t(std::atol(argv[i + 1]));
        else if (!std::strcmp(argv[i], "--steps")) steps = std::atoi(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--methods")) methods = argv[i + 1];
    }
    auto comm = create_communicator_from_env();
    std::vector<std::string> names;
    for (std::size_t at = 0; at <= methods.size();) {
        const std::size_t comma = std::min(methods.find(',', at), methods.size());
        names.push_back(methods.substr(at, comma - at));
        at = comma + 1;
    }
    for (const std::string &name : names) {
        ParameterSet layout(DType::f32, side * side * sizeof(float)); // a bucket per matrix: reductions overlap
        for (int t = 0; t < 4; ++t) layout.add_matrix("w" + std::to_string(t), side, side);
        ShardingOptions options;
        options.compression.method = method_of(name);
        options.compression.ratio = 0.01;
        OptimizerOptions sgd = OptimizerOptions::defaults(OptimizerKind::sgd);
        sgd.lr = 1e-3;
        auto opt = ShardedOptimizer::create(comm, layout, sgd, options);
        std::vector<double> ms;
        std::uint64_t bytes = 0, link_bytes = 0;
        std::vector<float> source(side * side); // the "computed" gradient, copied in each step
        for (std::size_t i = 0; i < source.size(); ++i) source[i] = std::sin(float(i % 8191) * 0.01f * float(comm->rank() + 1));
        for (int step = 0; step < steps + 1; ++step) {
            comm->barrier();
            const std::uint64_t link_before = link_tx_bytes();
            const auto t0 = std::chrono::steady_clock::now();
            opt->zero_grad();
            for (int t = 0; t < 4; ++t) { // backward: each matrix handed over as it is "computed"
                std::memcpy(opt->grad(t), source.data(), source.size() * sizeof(float));
                opt->grad_ready(opt->layout().tensor(t).bucket);
            }
            const StepResult r = opt->step();
            const double elapsed = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            comm->barrier(); // every rank of the host done sending
            const std::uint64_t link_sent = link_tx_bytes() - link_before;
            if (step == 0) continue; // warm-up: connections, first allocations
            ms.push_back(elapsed);
            bytes += r.bytes_sent;
            link_bytes += link_sent;
        }
        std::sort(ms.begin(), ms.end());
        if (comm->rank() == 0)
            std::printf("method=%s ranks=%d elements=%zu step_ms=%.2f bytes_per_step=%llu link_bytes_per_step=%llu\n",
                        name.c_str(), comm->size(), 4 * side * side, ms[ms.size() / 2],
                        static_cast<unsigned long long>(bytes / std::uint64_t(steps)),
                        static_cast<unsigned long long>(link_bytes / std::uint64_t(steps)));
        std::fflush(stdout);
    }
    return 0;
}

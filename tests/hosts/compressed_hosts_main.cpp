// Compressed gradient reduction across hosts over UCX (every rank of a job in network
// namespaces runs this; tests/hosts/netns_compressed.sh launches it). The job's communicator
// knows its hosts, so the reducer combines each host's ranks first (hierarchical_chunked_reducer).
// Checked on every rank:
//   - the communicator reports the hosts the launcher made (HOSTS x PER_HOST);
//   - bf16 of small integers and top-k keeping every element are lossless: DDP and ZeRO-2
//     trained with them equal uncompressed training bit for bit;
//   - int8 (error feedback): every rank holds the same parameters, near uncompressed training's.
// Exits 1 on this rank's first failed check, naming it.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "shardopt/sharded_optimizer.hpp"
#include "shardopt/ucx.hpp"

using namespace shardopt;

namespace {

// Parameters after `steps` SGD steps on gradients that are small integers (exact sums in f32,
// exact values in bf16), three buckets of sizes no world size divides.
std::vector<float> train(const CommunicatorPtr &comm, Strategy strategy, GradientCompression method, int steps) {
    ParameterSet layout(DType::f32, 4000);
    const std::size_t counts[3] = {1003, 517, 2049};
    for (int t = 0; t < 3; ++t) layout.add("t" + std::to_string(t), counts[t]);
    OptimizerOptions rule = OptimizerOptions::defaults(OptimizerKind::sgd);
    rule.lr = 0.125;
    ShardingOptions options;
    options.strategy = strategy;
    options.compression.method = method;
    options.compression.ratio = 1.0;
    std::vector<float> init(counts[0] + counts[1] + counts[2]);
    for (std::size_t i = 0; i < init.size(); ++i) init[i] = float(int(i % 17) - 8);
    auto opt = ShardedOptimizer::create(comm, layout, rule, options, init.data());
    for (int step = 0; step < steps; ++step) {
        opt->zero_grad();
        for (int t = 0; t < 3; ++t) {
            auto *g = static_cast<float *>(opt->grad(t));
            for (std::size_t i = 0; i < counts[t]; ++i)
                g[i] = float(int((i * 7 + std::size_t(t) * 13 + std::size_t(step) * 5) % 23) - 11) * float(comm->rank() + 1);
            opt->grad_ready(opt->layout().tensor(t).bucket);
        }
        opt->step();
    }
    std::vector<float> params(init.size());
    opt->get_parameters(params.data());
    return params;
}

int fail(const CommunicatorPtr &comm, const std::string &what) {
    std::fprintf(stderr, "rank %d: FAIL: %s\n", comm->rank(), what.c_str());
    return 1;
}

} // namespace

int main() {
    try {
        CommunicatorPtr comm = create_communicator_from_env("ucx");
        const int hosts = std::atoi(std::getenv("HOSTS") ? std::getenv("HOSTS") : "0");
        int seen = 0;
        for (int h : comm->host_of_ranks()) seen = std::max(seen, h + 1);
        if (seen != hosts) return fail(comm, "the communicator sees " + std::to_string(seen) + " hosts, not " + std::to_string(hosts));

        for (Strategy s : {Strategy::ddp, Strategy::zero2}) {
            const std::vector<float> plain = train(comm, s, GradientCompression::none, 3);
            for (GradientCompression m : {GradientCompression::bf16, GradientCompression::top_k})
                if (train(comm, s, m, 3) != plain)
                    return fail(comm, std::string(strategy_name(s)) + " with " + compression_name(m) +
                                          " differs from uncompressed training");
        }

        const std::vector<float> plain = train(comm, Strategy::ddp, GradientCompression::none, 6);
        const std::vector<float> int8 = train(comm, Strategy::ddp, GradientCompression::int8, 6);
        std::vector<float> all(int8.size() * std::size_t(comm->size()));
        comm->allgather(int8.data(), all.data(), int8.size(), DType::f32);
        for (int r = 0; r < comm->size(); ++r)
            if (!std::equal(int8.begin(), int8.end(), all.begin() + std::ptrdiff_t(std::size_t(r) * int8.size())))
                return fail(comm, "int8: rank " + std::to_string(r) + "'s parameters differ from this rank's");
        double worst = 0.0;
        for (std::size_t i = 0; i < int8.size(); ++i) worst = std::max(worst, double(std::fabs(int8[i] - plain[i])));
        if (!(worst > 0.0 && worst < 0.1)) return fail(comm, "int8: max |diff| from uncompressed " + std::to_string(worst));
        if (comm->rank() == 0)
            std::printf("PASS: %d ranks on %d hosts: lossless methods equal uncompressed training; int8 max |diff| %.3g\n",
                        comm->size(), hosts, worst);
        return 0;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "compressed_hosts_main: %s\n", e.what());
        return 1;
    }
}

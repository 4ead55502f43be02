// A C++ program built against the installed libshardopt-dev with find_package(shardopt) ->
// shardopt::shardopt_core: 2 in-process ranks minimize 0.5*|x - target|^2 with FSDP over Adam,
// and an allreduce; both ranks must end with the same parameters, near the target.
#include <shardopt/inprocess.hpp>
#include <shardopt/sharded_optimizer.hpp>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <vector>
using namespace shardopt;

int main() {
    const std::size_t n1 = 50, n2 = 13, n = n1 + n2;
    std::vector<std::vector<float>> result(2);
    std::mutex m;
    run_inprocess(2, [&](Communicator &comm) {
        ParameterSet layout(DType::f32);
        layout.add("a", n1);
        layout.end_bucket();
        layout.add("b", n2);
        ShardingOptions sharding;
        sharding.strategy = Strategy::fsdp;
        auto adam = OptimizerOptions::defaults(OptimizerKind::adam);
        adam.lr = 0.05;
        std::vector<float> x(n, 0.0f);
        auto opt = ShardedOptimizer::create(comm.shared_from_this(), layout, adam, sharding, x.data());
        for (int step = 0; step < 400; ++step) {
            opt->get_parameters(x.data());
            opt->zero_grad();
            for (int b = opt->layout().bucket_count() - 1; b >= 0; --b) {
                auto *g = static_cast<float *>(opt->bucket_grad(b));
                std::size_t start = b == 0 ? 0 : n1, count = b == 0 ? n1 : n2;
                for (std::size_t i = 0; i < count; ++i) g[i] = x[start + i] - float(start + i) / 10;
                opt->grad_ready(b);
            }
            opt->step();
        }
        opt->get_parameters(x.data());
        std::lock_guard<std::mutex> lock(m);
        result[comm.rank()] = x;
    });
    double worst = 0;
    for (std::size_t i = 0; i < n; ++i) worst = std::fmax(worst, std::fabs(result[0][i] - float(i) / 10));
    bool same = result[0] == result[1];
    std::printf("C++ consumer: 2 in-process ranks, FSDP Adam, ranks %s, largest distance from the target %.3g\n",
                same ? "equal" : "DIFFER", worst);
    return same && worst < 1e-2 ? 0 : 1;
}

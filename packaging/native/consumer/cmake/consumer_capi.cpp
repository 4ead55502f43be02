// The C ABI from C++ through find_package(shardopt) -> shardopt::shardopt: an allreduce on 2
// in-process ranks.
#include <shardopt.h>
#include <cstdio>
#include <thread>
#include <vector>

int main() {
    shardopt_comm comms[2];
    if (shardopt_comm_create_inprocess(2, comms) != SHARDOPT_OK) return 1;
    double out[2] = {0, 0};
    std::vector<std::thread> ranks;
    for (int r = 0; r < 2; ++r)
        ranks.emplace_back([&, r] {
            double v = r + 1;
            if (shardopt_allreduce(comms[r], &v, &out[r], 1, SHARDOPT_F64, SHARDOPT_SUM) != SHARDOPT_OK) out[r] = -1;
        });
    for (auto &t : ranks) t.join();
    for (auto c : comms) shardopt_comm_destroy(c);
    std::printf("C ABI from C++: allreduce on 2 ranks = %g, %g\n", out[0], out[1]);
    return out[0] == 3 && out[1] == 3 ? 0 : 1;
}

// Collective bandwidth benchmark over the communicator from the environment (run it under
// tools/shardopt-run). Prints, on rank 0, one line per (collective, size):
//   collective=allreduce ranks=2 bytes=4194304 algbw_GBps=... busbw_GBps=... time_us=...
// bytes is the full buffer (allreduce/broadcast: count*4; reduce_scatter: the input;
// allgather: the output), as nccl-tests counts it; busbw uses nccl-tests' factors:
// allreduce 2(n-1)/n, reduce_scatter and allgather (n-1)/n, broadcast 1.
//   collectives_main [--min BYTES] [--max BYTES] [--only NAME] [--iters N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "shardopt/ucx.hpp"

using namespace shardopt;

int main(int argc, char **argv) {
    std::size_t min_bytes = 64 << 10, max_bytes = std::size_t(256) << 20;
    std::string only;
    int iters_override = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--min")) min_bytes = std::strtoull(argv[i + 1], nullptr, 10);
        else if (!std::strcmp(argv[i], "--max")) max_bytes = std::strtoull(argv[i + 1], nullptr, 10);
        else if (!std::strcmp(argv[i], "--only")) only = argv[i + 1];
        else if (!std::strcmp(argv[i], "--iters")) iters_override = std::atoi(argv[i + 1]);
    }
    auto comm = create_communicator_from_env();
    const int n = comm->size(), me = comm->rank();
    std::vector<float> a(max_bytes / 4 + 1, 1.0f), b(max_bytes / 4 + 1, 0.0f);
    const char *names[] = {"allreduce", "reduce_scatter", "allgather", "broadcast"};
    for (const char *name : names) {
        if (!only.empty() && only != name) continue;
        for (std::size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
            const std::size_t count = bytes / 4;
            const std::size_t per_rank = count / std::size_t(n);
            auto once = [&] {
                if (!std::strcmp(name, "allreduce")) comm->allreduce(a.data(), b.data(), count, DType::f32, ReduceOp::sum);
                else if (!std::strcmp(name, "reduce_scatter"))
                    comm->reduce_scatter(a.data(), b.data(), per_rank, DType::f32, ReduceOp::sum);
                else if (!std::strcmp(name, "allgather")) comm->allgather(a.data(), b.data(), per_rank, DType::f32);
                else comm->broadcast(a.data(), count, DType::f32, 0);
            };
            const int iters = iters_override > 0 ? iters_override
                                                  : int(std::clamp<std::size_t>((std::size_t(2) << 30) / bytes, 3, 50));
            once(); // warm-up
            comm->barrier();
            const auto t0 = std::chrono::steady_clock::now();
            for (int i = 0; i < iters; ++i) once();
            comm->barrier();
            const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
            const double algbw = double(bytes) / secs / 1e9;
            double factor = 1.0;
            if (!std::strcmp(name, "allreduce")) factor = 2.0 * (n - 1) / n;
            else if (std::strcmp(name, "broadcast") != 0) factor = double(n - 1) / n;
            if (me == 0)
                std::printf("collective=%s ranks=%d bytes=%zu algbw_GBps=%.3f busbw_GBps=%.3f time_us=%.2f\n", name, n,
                            bytes, algbw, algbw * factor, secs * 1e6);
            std::fflush(stdout);
        }
    }
    return 0;
}

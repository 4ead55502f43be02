// Collective bandwidth benchmark over the communicator from the environment (run it under
// tools/shardopt-run). Prints, on rank 0, one line per (collective, size):
//   collective=allreduce ranks=2 bytes=4194304 algbw_GBps=... busbw_GBps=... time_us=...
// bytes is the full buffer (allreduce/broadcast: count*4; reduce_scatter: the input;
// allgather: the output), as nccl-tests counts it; busbw uses nccl-tests' factors:
// allreduce 2(n-1)/n, reduce_scatter and allgather (n-1)/n, broadcast 1.
// With --copy-gbps (the machine's copy bandwidth at n threads, bench_copy_bandwidth n), each line
// also carries the memory-bandwidth bound: the bytes the collective's algorithm must read and
// write over all ranks through shared memory (memory_traffic below) over that bandwidth, as a
// busbw (bound_busbw_GBps) and the fraction of it reached (of_bound), which reads the same on
// any machine.
//   collectives_main [--min BYTES] [--max BYTES] [--only NAME] [--iters N] [--copy-gbps GBPS]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "shardopt/ucx.hpp"

using namespace shardopt;

// Bytes read plus bytes written over all n ranks by the least a shared-memory algorithm moves,
// for a collective of `bytes` (as nccl-tests counts them: allreduce/broadcast the buffer,
// reduce_scatter the input, allgather the output; not in place).
//   allreduce       reduce-scatter then allgather: each rank reads its segment of every input
//                   (bytes) and writes it reduced (bytes/n), then reads and writes the other
//                   n-1 segments: (3n-1)/n x bytes per rank
//   reduce_scatter  each rank reads its segment of every input and writes it: (n+1)/n x bytes
//   allgather       each rank reads every piece and writes its whole output: 2 x bytes
//   broadcast       every rank but the root reads and writes the buffer
static double memory_traffic(const char *name, std::size_t bytes, int n) {
    const double b = double(bytes);
    if (!std::strcmp(name, "allreduce")) return (3.0 * n - 1) * b;
    if (!std::strcmp(name, "reduce_scatter")) return (n + 1.0) * b;
    if (!std::strcmp(name, "allgather")) return 2.0 * n * b;
    return 2.0 * (n - 1) * b;
}

int main(int argc, char **argv) {
    std::size_t min_bytes = 64 << 10, max_bytes = std::size_t(256) << 20;
    std::string only;
    int iters_override = 0;
    double copy_gbps = 0; // 0: no bound printed
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--min")) min_bytes = std::strtoull(argv[i + 1], nullptr, 10);
        else if (!std::strcmp(argv[i], "--max")) max_bytes = std::strtoull(argv[i + 1], nullptr, 10);
        else if (!std::strcmp(argv[i], "--only")) only = argv[i + 1];
        else if (!std::strcmp(argv[i], "--iters")) iters_override = std::atoi(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--copy-gbps")) copy_gbps = std::atof(argv[i + 1]);
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
            if (me == 0) {
                std::printf("collective=%s ranks=%d bytes=%zu algbw_GBps=%.3f busbw_GBps=%.3f time_us=%.2f", name, n,
                            bytes, algbw, algbw * factor, secs * 1e6);
                if (copy_gbps > 0) {
                    const double bound_secs = memory_traffic(name, bytes, n) / (copy_gbps * 1e9);
                    std::printf(" bound_busbw_GBps=%.3f of_bound=%.2f", double(bytes) / bound_secs / 1e9 * factor,
                                bound_secs / secs);
                }
                std::printf("\n");
            }
            std::fflush(stdout);
        }
    }
    return 0;
}

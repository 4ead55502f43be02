// Shared by the peer benchmarks: the sizes, iteration counts and output line of
// bench/collectives_main.cpp, so peer lines compare one to one with shardopt's:
//   peer=NAME collective=allreduce ranks=N bytes=B algbw_GBps=... busbw_GBps=... time_us=...
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

struct PeerArgs {
    std::size_t min_bytes = 64 << 10, max_bytes = std::size_t(256) << 20;
    int iters_override = 0;
    PeerArgs(int argc, char **argv) {
        for (int i = 1; i + 1 < argc; i += 2) {
            if (!std::strcmp(argv[i], "--min")) min_bytes = std::strtoull(argv[i + 1], nullptr, 10);
            else if (!std::strcmp(argv[i], "--max")) max_bytes = std::strtoull(argv[i + 1], nullptr, 10);
            else if (!std::strcmp(argv[i], "--iters")) iters_override = std::atoi(argv[i + 1]);
        }
    }
    int iters(std::size_t bytes) const {
        return iters_override > 0 ? iters_override : int(std::clamp<std::size_t>((std::size_t(2) << 30) / bytes, 3, 50));
    }
};

// Times `iters` allreduces (after one warm-up), bracketed by barriers, and prints on rank 0.
template <typename Once, typename Barrier>
void time_allreduce(const char *peer, int rank, int n, std::size_t bytes, int iters, Once once, Barrier barrier) {
    once();
    barrier();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) once();
    barrier();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
    const double algbw = double(bytes) / secs / 1e9;
    if (rank == 0)
        std::printf("peer=%s collective=allreduce ranks=%d bytes=%zu algbw_GBps=%.3f busbw_GBps=%.3f time_us=%.2f\n",
                    peer, n, bytes, algbw, algbw * 2.0 * (n - 1) / n, secs * 1e6);
    std::fflush(stdout);
}

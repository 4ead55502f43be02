// The machine's copy bandwidth at a given number of threads: the denominator of the
// memory-bandwidth bound bench/collectives.sh prints beside every collective figure.
// Each thread copies its own 64 MiB buffer (far larger than the caches) repeatedly; the line
// counts every byte read and every byte written, so a collective whose algorithm must read and
// write T bytes in total over all ranks cannot take less than T / bw_GBps:
//   copy threads=4 bytes_per_thread=67108864 bw_GBps=...
//   copy_bandwidth_main THREADS
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

int main(int argc, char **argv) {
    const int threads = argc > 1 ? std::max(1, std::atoi(argv[1])) : 1;
    constexpr std::size_t kBytes = std::size_t(64) << 20;
    constexpr int kReps = 5;
    std::vector<std::vector<unsigned char>> src(threads), dst(threads);
    for (int t = 0; t < threads; ++t) {
        src[t].assign(kBytes, static_cast<unsigned char>(t + 1));
        dst[t].assign(kBytes, 0);
    }
    double best = 1e30;
    for (int rep = 0; rep < kReps; ++rep) {
        std::vector<std::thread> pool;
        const auto t0 = std::chrono::steady_clock::now();
        for (int t = 0; t < threads; ++t)
            pool.emplace_back([&, t] { std::memcpy(dst[t].data(), src[t].data(), kBytes); });
        for (auto &th : pool) th.join();
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    // Read and written: two bytes of traffic per copied byte.
    std::printf("copy threads=%d bytes_per_thread=%zu bw_GBps=%.3f\n", threads, kBytes,
                2.0 * double(kBytes) * threads / best / 1e9);
    return 0;
}

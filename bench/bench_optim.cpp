// Optimizer-update throughput against memory bandwidth. For f32 Adam the update reads p, g, m, v
// and writes p, m, v: 28 bytes per parameter per step. The reference is a plain memcpy of a
// buffer far larger than the caches, measured in the same run, counting bytes read + written.
// Every figure is the best of several repetitions (the machine may be shared).
//
//   bench_optim [--sizes 16,64,256] [--threads 1,2] [--copy-mib 256] [--kernels auto|generic]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "optim/cpu_dispatch.hpp"
#include "optim/parallel_update.hpp"
#include "parse_list.hpp"
#include "shardopt/optim.hpp"

using namespace shardopt;
using bench::parse_list;
using Clock = std::chrono::steady_clock;

namespace {

template <typename T> T *alloc(std::size_t n) {
    const std::size_t bytes = (n * sizeof(T) + 4095) / 4096 * 4096;
    void *p = std::aligned_alloc(4096, bytes);
    if (!p) {
        std::fprintf(stderr, "bench_optim: cannot allocate %zu bytes\n", bytes);
        std::exit(1);
    }
    return static_cast<T *>(p);
}

template <typename F> double best_seconds(int reps, F &&f) {
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
        const auto t0 = Clock::now();
        f(r);
        best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
    }
    return best;
}

// A plain element loop (SSE2 vectors, ordinary stores), kept from becoming a memcpy call.
__attribute__((optimize("no-tree-loop-distribute-patterns"))) void loop_copy(const float *__restrict src,
                                                                               float *__restrict dst, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) dst[i] = src[i];
}

// Copy bandwidth with `threads` threads (each copies a contiguous part), bytes read + written:
// glibc memcpy (non-temporal stores for large sizes) or the plain loop.
double copy_gbps(ParallelUpdate &engine, int threads, const char *src, char *dst, std::size_t bytes, int reps,
                 bool use_memcpy) {
    const double s = best_seconds(reps, [&](int) {
        engine.pool().run(threads, [&](int j) {
            const std::size_t line = 4096;
            const std::size_t lo = bytes / threads / line * line * j,
                              hi = j + 1 == threads ? bytes : bytes / threads / line * line * (j + 1);
            if (use_memcpy) std::memcpy(dst + lo, src + lo, hi - lo);
            else loop_copy(reinterpret_cast<const float *>(src + lo), reinterpret_cast<float *>(dst + lo), (hi - lo) / 4);
        });
    });
    return 2.0 * double(bytes) / s / 1e9;
}

} // namespace

int main(int argc, char **argv) {
    std::vector<long> sizes_mi{16, 64, 256}, thread_counts{1, 2};
    std::size_t copy_mib = 256;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i], v = argv[i + 1];
        if (a == "--sizes") sizes_mi = parse_list(v);
        else if (a == "--threads") thread_counts = parse_list(v);
        else if (a == "--copy-mib") copy_mib = std::stoul(v);
        else if (a == "--kernels") optim_kernels::force_generic_kernels(v == "generic");
        else {
            std::fprintf(stderr, "usage: bench_optim [--sizes 16,64,256] [--threads 1,2] [--copy-mib 256] [--kernels auto|generic]\n");
            return 2;
        }
    }
    const long max_threads = *std::max_element(thread_counts.begin(), thread_counts.end());
    const std::size_t max_n = std::size_t(*std::max_element(sizes_mi.begin(), sizes_mi.end())) << 20;

    // One pool for copy and update, so both use the same threads.
    std::map<long, ParallelUpdate> engines;
    for (long t : thread_counts) engines.try_emplace(t, int(t));

    const std::size_t copy_bytes = copy_mib << 20;
    char *src = alloc<char>(copy_bytes), *dst = alloc<char>(copy_bytes);
    std::memset(src, 1, copy_bytes);
    std::memset(dst, 0, copy_bytes);

    float *p = alloc<float>(max_n), *g = alloc<float>(max_n), *m = alloc<float>(max_n), *v = alloc<float>(max_n);
    for (std::size_t i = 0; i < max_n; ++i) {
        p[i] = 0.5f - float(i % 1013) * 1e-3f;
        g[i] = 1e-3f + float(i % 997) * 1e-5f;
        m[i] = 0.0f;
        v[i] = 0.0f;
    }

    // Copy bandwidth before and after the updates; the best of memcpy and the plain loop is the
    // reference (the stricter one for the ratio).
    std::map<long, double> memcpy_bw, loop_bw, copy;
    auto measure_copy = [&] {
        for (long t : thread_counts) {
            memcpy_bw[t] = std::max(memcpy_bw[t], copy_gbps(engines.at(t), int(t), src, dst, copy_bytes, 5, true));
            loop_bw[t] = std::max(loop_bw[t], copy_gbps(engines.at(t), int(t), src, dst, copy_bytes, 5, false));
            copy[t] = std::max(memcpy_bw[t], loop_bw[t]);
        }
    };
    measure_copy();

    auto adam = Optimizer::create(OptimizerOptions::defaults(OptimizerKind::adam));
    struct Row {
        long mi, threads;
        double seconds;
    };
    std::vector<Row> rows;
    int64_t step = 1;
    for (long mi : sizes_mi) {
        const std::size_t n = std::size_t(mi) << 20;
        Segment<float> seg;
        seg.param = p;
        seg.grad = g;
        seg.state[0] = m;
        seg.state[1] = v;
        seg.count = n;
        const std::vector<Segment<float>> segments{seg};
        const int reps = mi >= 256 ? 3 : mi >= 64 ? 6 : 10;
        for (long t : thread_counts) engines.at(t).apply(*adam, segments, step++, nullptr); // warm-up
        // Interleaved with the copy, so both see the same load on a shared machine.
        std::map<long, double> best;
        for (int r = 0; r < reps; ++r)
            for (long t : thread_counts) {
                ParallelUpdate &engine = engines.at(t);
                const double s = best_seconds(1, [&](int) { engine.apply(*adam, segments, step++, nullptr); });
                best[t] = r == 0 ? s : std::min(best[t], s);
                memcpy_bw[t] = std::max(memcpy_bw[t], copy_gbps(engine, int(t), src, dst, copy_bytes, 1, true));
                loop_bw[t] = std::max(loop_bw[t], copy_gbps(engine, int(t), src, dst, copy_bytes, 1, false));
                copy[t] = std::max(memcpy_bw[t], loop_bw[t]);
            }
        for (long t : thread_counts) rows.push_back({mi, t, best[t]});
    }
    measure_copy();

    const double copy1 = copy.at(thread_counts.front());
    std::map<std::pair<long, long>, double> pps;
    for (const Row &r : rows) {
        const double n = double(std::size_t(r.mi) << 20);
        const double rate = n / r.seconds, gbps = 28.0 * n / r.seconds / 1e9;
        pps[{r.mi, r.threads}] = rate;
        std::printf("name=optim kernel=adam dtype=f32 isa=%s params=%zu threads=%ld params_per_s=%.4g eff_GBps=%.2f "
                    "copy_GBps=%.2f ratio_vs_copy=%.3f\n",
                    optim_kernels::use_avx2() ? "avx2" : "sse2", std::size_t(r.mi) << 20, r.threads, rate, gbps, copy.at(r.threads), gbps / copy.at(r.threads));
    }
    for (long t : thread_counts)
        std::printf("name=optim kernel=copy bytes=%zu threads=%ld memcpy_GBps=%.2f loop_copy_GBps=%.2f copy_GBps=%.2f\n",
                    copy_bytes, t, memcpy_bw.at(t), loop_bw.at(t), copy.at(t));

    // Targets: 1 thread at 64M >= 90% of the copy. 2 threads: the update is bound by memory
    // bandwidth, so it can scale only as far as the copy does on this machine (on the 2-core
    // development VM the copy gains 1.0-1.12x from a second thread): the target is to stay at
    // that bound, >= 90% of the 2-thread copy's bandwidth, and the line gives both speed-ups.
    if (pps.count({64, 1})) {
        const double ratio = 28.0 * pps[{64, 1}] / 1e9 / copy1;
        std::printf("name=optim target=adam_f32_64M_1thread_vs_copy value=%.3f required=0.90 met=%s\n", ratio,
                    ratio >= 0.90 ? "yes" : "no");
    }
    for (long mi : sizes_mi)
        if (pps.count({mi, 1}) && pps.count({mi, 2}) && copy.count(1) && copy.count(2)) {
            const double speedup = pps[{mi, 2}] / pps[{mi, 1}];
            const double of_copy = 28.0 * pps[{mi, 2}] / 1e9 / copy.at(2);
            std::printf("name=optim target=adam_f32_%ldM_2threads_at_copy_bound value=%.3f required=0.90 "
                        "speedup_2threads_vs_1=%.3f copy_speedup_2threads_vs_1=%.3f met=%s\n",
                        mi, of_copy, speedup, copy.at(2) / copy.at(1), of_copy >= 0.90 ? "yes" : "no");
        }
    // Busy machines (load above the core count) cannot show thread scaling: say so.
    if (FILE *f = std::fopen("/proc/loadavg", "r")) {
        double load = 0;
        if (std::fscanf(f, "%lf", &load) == 1)
            std::printf("name=optim context=loadavg_1min value=%.2f cores=%u\n", load, std::thread::hardware_concurrency());
        std::fclose(f);
    }
    // What this machine's memory allows: the copy's own speedup from 1 to 2 threads.
    if (copy.count(1) && copy.count(2))
        std::printf("name=optim context=copy_2threads_vs_1 value=%.3f\n", copy.at(2) / copy.at(1));
    (void)max_threads;
    std::free(p);
    std::free(g);
    std::free(m);
    std::free(v);
    std::free(src);
    std::free(dst);
    return 0;
}

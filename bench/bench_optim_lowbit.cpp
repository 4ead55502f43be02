// Low-bit optimizer state: the update throughput of 8-bit and 4-bit Adam (and f32 Adam, the same
// run) against the memory-traffic bound. Per element an 8-bit step reads p, g and the two codes
// and writes p and the codes: 4 + 4 + 1 + 1 read, 4 + 1 + 1 written = 16 bytes, plus two scales
// per 256 elements read and written (0.0625); 4-bit: 14 bytes plus two scales per 128 (0.125).
// The bound is those bytes at the plain copy bandwidth measured in the same run (bytes read +
// written); the figure is the best of several repetitions (the machine may be shared).
//
// What bounds it on a given core is printed too: f32 Adam's own arithmetic (its division and
// square root per element, the same in the low-bit rules), stepped on 2048 elements that stay
// in L1, expressed against the 8-bit bound. No 8-bit kernel doing Adam's IEEE arithmetic can be
// faster than that ceiling.
//
//   bench_optim_lowbit [--sizes 16,64] [--threads 1] [--copy-mib 256] [--kernels auto|generic]
//                      [--in-cache N: N elements stepped 2000 times, the compute cost alone]
//                      [--cases adam_f32,adam_8bit,adam_4bit]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <sys/resource.h>
#include <vector>

#include "optim/cpu_dispatch.hpp"
#include "optim/lowbit.hpp"
#include "optim/parallel_update.hpp"
#include "parse_list.hpp"
#include "shardopt/optim.hpp"

using namespace shardopt;
using bench::parse_list;
using Clock = std::chrono::steady_clock;

namespace {

template <typename T> T *alloc(std::size_t n) {
    const std::size_t bytes = std::max<std::size_t>((n * sizeof(T) + 4095) / 4096 * 4096, 4096);
    void *p = std::aligned_alloc(4096, bytes);
    if (!p) {
        std::fprintf(stderr, "bench_optim_lowbit: cannot allocate %zu bytes\n", bytes);
        std::exit(1);
    }
    std::memset(p, 0, bytes);
    return static_cast<T *>(p);
}

template <typename F> double seconds_of(F &&f) {
    const auto t0 = Clock::now();
    f();
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// One 8-bit decode: a code's value by a table load, as the rule's (scalar: this core's AVX2
// gather is slower than single loads).
__attribute__((noinline, optimize("no-tree-vectorize"))) void decode_codes(const float *__restrict values,
                                                                         const std::uint8_t *__restrict codes,
                                                                         std::size_t n, float *__restrict out) {
    for (std::size_t k = 0; k < n; ++k) out[k] = values[codes[k]];
}

__attribute__((optimize("no-tree-loop-distribute-patterns"))) void loop_copy(const float *__restrict src,
                                                                               float *__restrict dst, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) dst[i] = src[i];
}

// CPU seconds of the whole process (every thread, user + system): on a shared machine the
// compute a run needed, whatever share of the cores it got.
double process_cpu_seconds() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// Best of memcpy and a plain loop, `threads` threads, bytes read + written per second.
double copy_gbps(ParallelUpdate &engine, int threads, const char *src, char *dst, std::size_t bytes) {
    double best = 0.0;
    for (bool use_memcpy : {true, false}) {
        const double s = seconds_of([&] {
            engine.pool().run(threads, [&](int j) {
                const std::size_t line = 4096;
                const std::size_t lo = bytes / threads / line * line * j,
                                  hi = j + 1 == threads ? bytes : bytes / threads / line * line * (j + 1);
                if (use_memcpy) std::memcpy(dst + lo, src + lo, hi - lo);
                else loop_copy(reinterpret_cast<const float *>(src + lo), reinterpret_cast<float *>(dst + lo), (hi - lo) / 4);
            });
        });
        best = std::max(best, 2.0 * double(bytes) / s / 1e9);
    }
    return best;
}

struct Case {
    const char *name;
    StatePrecision precision;
    double bytes_per_param;
};

} // namespace

int main(int argc, char **argv) {
    std::vector<long> sizes_mi{16, 64}, thread_counts{1};
    std::size_t copy_mib = 256, in_cache = 0;
    std::string only; // empty: every case
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i], v = argv[i + 1];
        if (a == "--sizes") sizes_mi = parse_list(v);
        else if (a == "--threads") thread_counts = parse_list(v);
        else if (a == "--copy-mib") copy_mib = std::stoul(v);
        else if (a == "--in-cache") in_cache = std::stoul(v); // elements, stepped repeatedly: compute cost alone
        else if (a == "--kernels") optim_kernels::force_generic_kernels(v == "generic");
        else if (a == "--cases") only = "," + v + ",";
        else {
            std::fprintf(stderr, "usage: bench_optim_lowbit [--sizes 16,64] [--threads 1] [--copy-mib 256] "
                                 "[--kernels auto|generic] [--in-cache N] [--cases adam_f32,adam_8bit,adam_4bit]\n");
            return 2;
        }
    }
    const std::size_t max_n = std::size_t(*std::max_element(sizes_mi.begin(), sizes_mi.end())) << 20;
    const std::size_t copy_bytes = copy_mib << 20;
    char *src = alloc<char>(copy_bytes), *dst = alloc<char>(copy_bytes);
    std::memset(src, 1, copy_bytes);

    float *p = alloc<float>(max_n), *g = alloc<float>(max_n), *m = alloc<float>(max_n), *v = alloc<float>(max_n);
    std::uint8_t *codes[2] = {alloc<std::uint8_t>(max_n), alloc<std::uint8_t>(max_n)};
    float *scales[2] = {alloc<float>(max_n / 128 + 1), alloc<float>(max_n / 128 + 1)};
    for (std::size_t i = 0; i < max_n; ++i) {
        p[i] = 0.5f - float(i % 1013) * 1e-3f;
        g[i] = 1e-3f - float(i % 997) * 2e-6f;
    }

    const Case cases[] = {{"adam_f32", StatePrecision::full, 28.0},
                          {"adam_8bit", StatePrecision::bits8, 16.0 + 16.0 / 256.0},
                          {"adam_4bit", StatePrecision::bits4, 14.0 + 16.0 / 128.0}};
    for (long threads : thread_counts) {
        ParallelUpdate engine{int(threads)};
        double copy = copy_gbps(engine, int(threads), src, dst, copy_bytes);
        for (long mi : sizes_mi) {
            const std::size_t n = in_cache ? in_cache : std::size_t(mi) << 20;
            const int reps = in_cache ? 2000 : mi >= 64 ? 4 : 8;
            for (const Case &c : cases) {
                if (!only.empty() && only.find("," + std::string(c.name) + ",") == std::string::npos) continue;
                OptimizerOptions o = OptimizerOptions::defaults(OptimizerKind::adam);
                o.state_precision = c.precision;
                const auto adam = Optimizer::create(o);
                Segment<float> seg;
                seg.param = p;
                seg.grad = g;
                seg.count = n;
                seg.shape.count = n;
                if (c.precision == StatePrecision::full) {
                    seg.state[0] = m;
                    seg.state[1] = v;
                } else {
                    for (int k = 0; k < 2; ++k) seg.lowbit[k] = LowBitArray{codes[k], scales[k]};
                }
                const std::vector<Segment<float>> segments{seg};
                std::int64_t step = 1;
                engine.apply(*adam, segments, step++, nullptr); // warm-up (and state that is not all zero)
                double best = 1e30, best_cpu = 1e30;
                for (int r = 0; r < reps; ++r) {
                    const double cpu0 = process_cpu_seconds();
                    best = std::min(best, seconds_of([&] { engine.apply(*adam, segments, step++, nullptr); }));
                    best_cpu = std::min(best_cpu, process_cpu_seconds() - cpu0);
                    if (!in_cache) copy = std::max(copy, copy_gbps(engine, int(threads), src, dst, copy_bytes));
                }
                const double rate = double(n) / best, gbps = c.bytes_per_param * rate / 1e9;
                // By CPU time (getrusage's 1-4 ms resolution: only meaningful for runs of 50 ms and
                // more): the rate had the run had its cores to itself.
                const double cpu_rate = best_cpu > 0.0 ? double(n) * double(threads) / best_cpu : 0.0;
                std::printf("name=optim_lowbit kernel=%s isa=%s params=%zu threads=%ld params_per_s=%.4g "
                            "bytes_per_param=%.4g eff_GBps=%.2f copy_GBps=%.2f ratio_vs_bound=%.3f "
                            "params_per_cpu_s=%.4g ratio_vs_bound_cpu=%.3f\n",
                            c.name, optim_kernels::use_avx2() ? "avx2" : "sse2", n, threads, rate, c.bytes_per_param,
                            gbps, copy, gbps / copy, cpu_rate, c.bytes_per_param * cpu_rate / 1e9 / copy);
                if (c.precision == StatePrecision::bits8 && threads == 1 && mi == sizes_mi.back())
                    std::printf("name=optim_lowbit target=adam_8bit_%ldM_1thread_vs_bound value=%.3f required=0.60 "
                                "met=%s\n",
                                mi, gbps / copy, gbps / copy >= 0.6 ? "yes" : "no");
            }
        }
    }
    {
        // The arithmetic ceiling, one thread: f32 Adam on 2048 elements (32 KiB of p, g, m, v: L1).
        ParallelUpdate engine{1};
        const double copy = copy_gbps(engine, 1, src, dst, copy_bytes);
        const auto adam = Optimizer::create(OptimizerOptions::defaults(OptimizerKind::adam));
        Segment<float> seg;
        seg.param = p;
        seg.grad = g;
        seg.state[0] = m;
        seg.state[1] = v;
        seg.count = seg.shape.count = 2048;
        const std::vector<Segment<float>> segments{seg};
        std::int64_t step = 1;
        double best = 1e30, best_cpu = 1e30;
        for (int r = 0; r < 5; ++r) {
            const double cpu0 = process_cpu_seconds();
            best = std::min(best, seconds_of([&] {
                                for (int k = 0; k < 20000; ++k) engine.apply(*adam, segments, step++, nullptr);
                            }));
            best_cpu = std::min(best_cpu, process_cpu_seconds() - cpu0);
        }
        const double rate = 2048.0 * 20000.0 / best, cpu_rate = 2048.0 * 20000.0 / best_cpu;
        const double bytes8 = cases[1].bytes_per_param;
        std::printf("name=optim_lowbit context=adam_arithmetic_ceiling params_per_s=%.4g vs_8bit_bound=%.3f "
                    "params_per_cpu_s=%.4g vs_8bit_bound_cpu=%.3f (f32 Adam stepped in L1: its division and square "
                    "root alone; no 8-bit kernel doing the same IEEE arithmetic exceeds it)\n",
                    rate, bytes8 * rate / 1e9 / copy, cpu_rate, bytes8 * cpu_rate / 1e9 / copy);
        // Each 8-bit element also decodes two codes (m and v) before that arithmetic.
        std::vector<std::uint8_t> codes8(256);
        for (std::size_t k = 0; k < codes8.size(); ++k) codes8[k] = std::uint8_t(k * 37);
        alignas(64) float decoded[256];
        double best_decode = 1e30;
        for (int r = 0; r < 5; ++r)
            best_decode = std::min(best_decode, seconds_of([&] {
                                       for (int k = 0; k < 200000; ++k) {
                                           decode_codes(lowbit::signed8().values, codes8.data(), 256, decoded);
                                           codes8[std::size_t(k) & 255] ^= std::uint8_t(decoded[(k * 7) & 255] > 2.0f);
                                       }
                                   }));
        const double decode_rate = 256.0 * 200000.0 / best_decode;
        const double both = 1.0 / (1.0 / rate + 2.0 / decode_rate);
        std::printf("name=optim_lowbit context=decode_plus_arithmetic_ceiling decodes_per_s=%.4g params_per_s=%.4g "
                    "vs_8bit_bound=%.3f (two table decodes per element on top of the arithmetic, before any encode)\n",
                    decode_rate, both, bytes8 * both / 1e9 / copy);
    }
    if (FILE *f = std::fopen("/proc/loadavg", "r")) {
        double load = 0;
        if (std::fscanf(f, "%lf", &load) == 1)
            std::printf("name=optim_lowbit context=loadavg_1min value=%.2f cores=%u\n", load,
                        std::thread::hardware_concurrency());
        std::fclose(f);
    }
    for (void *ptr : {(void *)p, (void *)g, (void *)m, (void *)v, (void *)codes[0], (void *)codes[1],
                      (void *)scales[0], (void *)scales[1], (void *)src, (void *)dst})
        std::free(ptr);
    return 0;
}

// Gradient compression codecs against the memory: one thread encodes (with error feedback, as a
// rank does for every chunk it sends) and decode-adds (as the owner does for every chunk it
// receives) a chunk of f32 gradients, beside a memcpy of the same gradients in the same run. A
// codec near memcpy's time costs about one pass over the gradients; the compressed step is then
// limited by the link, not by the codec.
//   bench_codec [--elements N] [--reps R]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "sharding/compression/chunk_codec.hpp"

using namespace shardopt;
using Clock = std::chrono::steady_clock;

template <typename F> double median_seconds(int reps, F &&f) {
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) {
        const auto a = Clock::now();
        f();
        t.push_back(std::chrono::duration<double>(Clock::now() - a).count());
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

int main(int argc, char **argv) {
    std::size_t n = std::size_t(4) << 20;
    int reps = 9;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--elements")) n = std::size_t(std::atol(argv[i + 1]));
        else if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
    }
    std::vector<float> grad(n), residual(n, 0.0f), accum(n, 0.0f), copy(n);
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (auto &g : grad) g = normal(rng);

    const double memcpy_s = median_seconds(reps, [&] { std::memcpy(copy.data(), grad.data(), n * 4); });
    std::printf("# codecs, one thread, %zu f32 elements (%.0f MiB); memcpy %.2f GB/s; median of %d\n", n,
                double(n) * 4 / (1 << 20), double(n) * 4 / memcpy_s / 1e9, reps);
    std::printf("%-10s %12s %14s %12s %14s\n", "method", "encode GB/s", "encode/memcpy", "decode GB/s", "decode/memcpy");
    struct Case {
        const char *name;
        GradientCompression method;
    } cases[] = {{"bf16", GradientCompression::bf16},
                 {"int8", GradientCompression::int8},
                 {"int4", GradientCompression::int4},
                 {"top_k", GradientCompression::top_k}};
    for (const auto &c : cases) {
        CompressionOptions options;
        options.method = c.method;
        options.ratio = 0.01;
        compression::ChunkCodec codec(options, DType::f32);
        std::vector<unsigned char> payload(codec.payload_bytes(n));
        const double enc = median_seconds(reps, [&] { codec.encode(grad.data(), n, payload.data(), residual.data()); });
        const double dec = median_seconds(reps, [&] { codec.decode_add(payload.data(), n, accum.data()); });
        // Rates count the f32 gradients the codec covers, as memcpy's counts the bytes it copies.
        std::printf("%-10s %12.2f %14.2f %12.2f %14.2f\n", c.name, double(n) * 4 / enc / 1e9, memcpy_s / enc,
                    double(n) * 4 / dec / 1e9, memcpy_s / dec);
    }
    return 0;
}

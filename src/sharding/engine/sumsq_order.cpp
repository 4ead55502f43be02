#include "sumsq_order.hpp"

#include <algorithm>
#include <string>

#include "shardopt/error.hpp"

namespace shardopt::engine {
namespace {

constexpr int kWarp = 32;

// __shfl_down_sync's tree: lane i adds lane i + offset (lanes past the end add their own value,
// which never reaches lane 0). In increasing i, lane i + offset is still unchanged when read.
double warp_sum(double *lanes) {
    for (int offset = kWarp / 2; offset > 0; offset /= 2)
        for (int i = 0; i + offset < kWarp; ++i) lanes[i] += lanes[i + offset];
    return lanes[0];
}

template <typename T> double chunk_sum(const T *data, std::size_t n) {
    double threads[kSumsqThreads];
    for (int t = 0; t < kSumsqThreads; ++t) {
        double sum = 0.0;
        for (std::size_t i = std::size_t(t); i < n; i += kSumsqThreads) {
            const double x = double(data[i]);
            sum += x * x;
        }
        threads[t] = sum;
    }
    double warps[kWarp] = {}; // warp 0's lanes: the warp sums, zeros past them
    for (int w = 0; w < kSumsqThreads / kWarp; ++w) warps[w] = warp_sum(threads + w * kWarp);
    return warp_sum(warps);
}

template <typename T> double spans_sum(const std::vector<Span> &spans) {
    double total = 0.0;
    for (const Span &span : spans) {
        const T *data = reinterpret_cast<const T *>(span.data);
        for (std::size_t offset = 0; offset < span.count; offset += kSumsqChunkElements)
            total += chunk_sum(data + offset, std::min(kSumsqChunkElements, span.count - offset));
    }
    return total;
}

} // namespace

double sum_of_squares_in_kernel_order(const std::vector<Span> &spans, DType dtype) {
    require(dtype == DType::f32 || dtype == DType::f64, ErrorCode::invalid_argument,
            std::string("gradient dtype must be f32 or f64, got ") + dtype_name(dtype));
    return dtype == DType::f32 ? spans_sum<float>(spans) : spans_sum<double>(spans);
}

} // namespace shardopt::engine

#include "vector_ops.hpp"

#include "shardopt/error.hpp"

namespace shardopt {
namespace {

template <typename T> void add_typed(T *dst, const T *src, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) dst[i] += src[i];
}
template <typename T> void scale_typed(T *data, std::size_t n, T factor) {
    for (std::size_t i = 0; i < n; ++i) data[i] *= factor;
}
template <typename T> double sumsq_typed(const T *data, std::size_t n) {
    // Four partial sums: vectorizable, and a fixed order so results are reproducible.
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    std::size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += double(data[i]) * double(data[i]);
        s1 += double(data[i + 1]) * double(data[i + 1]);
        s2 += double(data[i + 2]) * double(data[i + 2]);
        s3 += double(data[i + 3]) * double(data[i + 3]);
    }
    for (; i < n; ++i) s0 += double(data[i]) * double(data[i]);
    return (s0 + s1) + (s2 + s3);
}

void require_float(DType dtype) {
    require(dtype == DType::f32 || dtype == DType::f64, ErrorCode::invalid_argument,
            std::string("gradient dtype must be f32 or f64, got ") + dtype_name(dtype));
}

} // namespace

void add_into(void *dst, const void *src, std::size_t count, DType dtype) {
    require_float(dtype);
    if (dtype == DType::f32) add_typed(static_cast<float *>(dst), static_cast<const float *>(src), count);
    else add_typed(static_cast<double *>(dst), static_cast<const double *>(src), count);
}

void scale(void *data, std::size_t count, DType dtype, double factor) {
    require_float(dtype);
    if (dtype == DType::f32) scale_typed(static_cast<float *>(data), count, float(factor));
    else scale_typed(static_cast<double *>(data), count, factor);
}

double sum_of_squares(const void *data, std::size_t count, DType dtype) {
    require_float(dtype);
    if (dtype == DType::f32) return sumsq_typed(static_cast<const float *>(data), count);
    return sumsq_typed(static_cast<const double *>(data), count);
}

} // namespace shardopt

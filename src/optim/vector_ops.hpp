// Small element-wise passes the sharded optimizers run over gradient ranges, for f32 and f64.
#pragma once

#include <cstddef>

#include "shardopt/types.hpp"

namespace shardopt {

// dst[i] += src[i]
void add_into(void *dst, const void *src, std::size_t count, DType dtype);
// data[i] *= factor
void scale(void *data, std::size_t count, DType dtype, double factor);
// sum of data[i]^2, accumulated in double (NaN/Inf propagate)
double sum_of_squares(const void *data, std::size_t count, DType dtype);

} // namespace shardopt

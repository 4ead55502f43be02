// Element-wise reduction kernels used by every CPU backend. f16/bf16 are accumulated in float
// and rounded once at the end; other types accumulate in their own type.
#pragma once

#include <cstddef>

#include "shardopt/types.hpp"

namespace shardopt {

// out[i] = inputs[0][i] op inputs[1][i] op ... op inputs[n-1][i], always in that order, so the
// result is bitwise reproducible. avg divides the sum by n_inputs. out may alias any input.
void reduce_inputs(const void *const *inputs, int n_inputs, void *out, std::size_t count, DType dtype,
                   ReduceOp op);

// inout[i] = inout[i] op in[i]; avg accumulates as sum (finish with divide_by_count).
void combine_into(void *inout, const void *in, std::size_t count, DType dtype, ReduceOp op);

// buf[i] /= divisor: the last stage of an avg built from combine_into.
void divide_by_count(void *buf, std::size_t count, DType dtype, int divisor);

} // namespace shardopt

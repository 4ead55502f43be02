// PowerSGD's three passes over a gradient matrix M (rows x cols, row-major), each one stream
// over M with r multiply-adds per element. Q and P are row-major (cols x r, rows x r); inside, Q
// is used transposed (r x cols) so every inner loop runs along a row of M. Each pass is compiled
// for baseline x86-64 and for AVX2 doing the same IEEE operations in the same order (no FMA), so
// results do not depend on the machine. `scratch` has room for cols * (r + 1) elements.
#pragma once

#include <cstddef>

namespace shardopt::compression::power_sgd_kernels {

// M += residual (when not null), then P = M Q.
template <typename T>
void project(T *m, const T *residual, std::size_t rows, std::size_t cols, std::size_t r, const T *q, T *p, T *scratch);

// Q = M^T P (Q is overwritten).
template <typename T>
void project_back(const T *m, std::size_t rows, std::size_t cols, std::size_t r, const T *p, T *q, T *scratch);

// M ~ P Q^T: the residual (when not null) keeps M - P Q^T, then M becomes P Q^T.
template <typename T>
void reconstruct(T *m, T *residual, std::size_t rows, std::size_t cols, std::size_t r, const T *p, const T *q, T *scratch);

} // namespace shardopt::compression::power_sgd_kernels

#include "power_sgd_kernels.hpp"

#include "optim/cpu_dispatch.hpp"

namespace shardopt::compression::power_sgd_kernels {
namespace {

template <typename T> void transpose(const T *a, std::size_t n, std::size_t r, T *at) { // a: n x r -> r x n
    for (std::size_t j = 0; j < n; ++j)
        for (std::size_t k = 0; k < r; ++k) at[k * n + j] = a[j * r + k];
}

// Eight partial sums, added in a fixed order: the same arithmetic whatever the vector width.
template <typename T> [[gnu::always_inline]] inline T dot(const T *__restrict a, const T *__restrict b, std::size_t n) {
    T acc[8] = {};
    std::size_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (std::size_t l = 0; l < 8; ++l) acc[l] += a[j + l] * b[j + l];
    for (; j < n; ++j) acc[0] += a[j] * b[j];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

template <typename T>
[[gnu::always_inline]] inline void project_loop(T *m, const T *residual, std::size_t rows, std::size_t cols, std::size_t r,
                                                const T *q, T *p, T *scratch) {
    T *qt = scratch;
    transpose(q, cols, r, qt);
    for (std::size_t i = 0; i < rows; ++i) {
        T *__restrict row = m + i * cols;
        if (residual) {
            const T *__restrict res = residual + i * cols;
            for (std::size_t j = 0; j < cols; ++j) row[j] += res[j];
        }
        for (std::size_t k = 0; k < r; ++k) p[i * r + k] = dot<T>(row, qt + k * cols, cols); // row stays in cache
    }
}

template <typename T>
[[gnu::always_inline]] inline void project_back_loop(const T *m, std::size_t rows, std::size_t cols, std::size_t r,
                                                     const T *p, T *q, T *scratch) {
    T *qt = scratch; // accumulated transposed: row k of Q^T is one contiguous run
    for (std::size_t e = 0; e < r * cols; ++e) qt[e] = T(0);
    for (std::size_t i = 0; i < rows; ++i) {
        const T *__restrict row = m + i * cols;
        for (std::size_t k = 0; k < r; ++k) {
            T *__restrict acc = qt + k * cols;
            const T pk = p[i * r + k];
            for (std::size_t j = 0; j < cols; ++j) acc[j] += row[j] * pk;
        }
    }
    for (std::size_t k = 0; k < r; ++k)
        for (std::size_t j = 0; j < cols; ++j) q[j * r + k] = qt[k * cols + j];
}

template <typename T>
[[gnu::always_inline]] inline void reconstruct_loop(T *m, T *residual, std::size_t rows, std::size_t cols, std::size_t r,
                                                    const T *p, const T *q, T *scratch) {
    T *qt = scratch, *approx = scratch + r * cols;
    transpose(q, cols, r, qt);
    for (std::size_t i = 0; i < rows; ++i) {
        T *__restrict a = approx;
        for (std::size_t j = 0; j < cols; ++j) a[j] = T(0);
        for (std::size_t k = 0; k < r; ++k) {
            const T *__restrict qk = qt + k * cols;
            const T pk = p[i * r + k];
            for (std::size_t j = 0; j < cols; ++j) a[j] += pk * qk[j];
        }
        T *__restrict row = m + i * cols;
        if (residual) {
            T *__restrict res = residual + i * cols;
            for (std::size_t j = 0; j < cols; ++j) res[j] = row[j] - a[j];
        }
        for (std::size_t j = 0; j < cols; ++j) row[j] = a[j];
    }
}

template <typename T> void project_generic(T *m, const T *res, std::size_t rows, std::size_t cols, std::size_t r, const T *q, T *p, T *s) {
    project_loop(m, res, rows, cols, r, q, p, s);
}
template <typename T> void project_back_generic(const T *m, std::size_t rows, std::size_t cols, std::size_t r, const T *p, T *q, T *s) {
    project_back_loop(m, rows, cols, r, p, q, s);
}
template <typename T> void reconstruct_generic(T *m, T *res, std::size_t rows, std::size_t cols, std::size_t r, const T *p, const T *q, T *s) {
    reconstruct_loop(m, res, rows, cols, r, p, q, s);
}
#if defined(__x86_64__) && defined(__GNUC__)
template <typename T>
__attribute__((target("avx2"))) void project_avx2(T *m, const T *res, std::size_t rows, std::size_t cols, std::size_t r,
                                                   const T *q, T *p, T *s) {
    project_loop(m, res, rows, cols, r, q, p, s);
}
template <typename T>
__attribute__((target("avx2"))) void project_back_avx2(const T *m, std::size_t rows, std::size_t cols, std::size_t r,
                                                        const T *p, T *q, T *s) {
    project_back_loop(m, rows, cols, r, p, q, s);
}
template <typename T>
__attribute__((target("avx2"))) void reconstruct_avx2(T *m, T *res, std::size_t rows, std::size_t cols, std::size_t r,
                                                       const T *p, const T *q, T *s) {
    reconstruct_loop(m, res, rows, cols, r, p, q, s);
}
constexpr bool kHaveAvx2Clones = true;
#else
constexpr bool kHaveAvx2Clones = false;
#endif

bool avx2() { return kHaveAvx2Clones && optim_kernels::use_avx2(); }

} // namespace

template <typename T>
void project(T *m, const T *residual, std::size_t rows, std::size_t cols, std::size_t r, const T *q, T *p, T *scratch) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (avx2()) return project_avx2(m, residual, rows, cols, r, q, p, scratch);
#endif
    project_generic(m, residual, rows, cols, r, q, p, scratch);
}

template <typename T>
void project_back(const T *m, std::size_t rows, std::size_t cols, std::size_t r, const T *p, T *q, T *scratch) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (avx2()) return project_back_avx2(m, rows, cols, r, p, q, scratch);
#endif
    project_back_generic(m, rows, cols, r, p, q, scratch);
}

template <typename T>
void reconstruct(T *m, T *residual, std::size_t rows, std::size_t cols, std::size_t r, const T *p, const T *q, T *scratch) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (avx2()) return reconstruct_avx2(m, residual, rows, cols, r, p, q, scratch);
#endif
    reconstruct_generic(m, residual, rows, cols, r, p, q, scratch);
}

template void project<float>(float *, const float *, std::size_t, std::size_t, std::size_t, const float *, float *, float *);
template void project<double>(double *, const double *, std::size_t, std::size_t, std::size_t, const double *, double *, double *);
template void project_back<float>(const float *, std::size_t, std::size_t, std::size_t, const float *, float *, float *);
template void project_back<double>(const double *, std::size_t, std::size_t, std::size_t, const double *, double *, double *);
template void reconstruct<float>(float *, float *, std::size_t, std::size_t, std::size_t, const float *, const float *, float *);
template void reconstruct<double>(double *, double *, std::size_t, std::size_t, std::size_t, const double *, const double *, double *);

} // namespace shardopt::compression::power_sgd_kernels

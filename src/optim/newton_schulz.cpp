#include "newton_schulz.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace shardopt {
namespace {

// c (m x m) = x x^T for x (m x n): dot products of rows, each accumulated in order.
template <typename T> void gram(const T *x, std::size_t m, std::size_t n, T *c) {
    for (std::size_t i = 0; i < m; ++i)
        for (std::size_t j = i; j < m; ++j) {
            const T *xi = x + i * n, *xj = x + j * n;
            T s = T(0);
            for (std::size_t k = 0; k < n; ++k) s += xi[k] * xj[k];
            c[i * m + j] = s;
            c[j * m + i] = s;
        }
}

// out (m x n) = beta * base + a (m x m) times x (m x n), each row accumulated k by k.
template <typename T>
void multiply_add(const T *a, const T *x, std::size_t m, std::size_t n, T beta, const T *base, T *out) {
    std::vector<T> row(n);
    for (std::size_t i = 0; i < m; ++i) {
        std::fill(row.begin(), row.end(), T(0));
        for (std::size_t k = 0; k < m; ++k) {
            const T aik = a[i * m + k];
            const T *xk = x + k * n;
            for (std::size_t j = 0; j < n; ++j) row[j] += aik * xk[j];
        }
        const T *bi = base + i * n;
        T *oi = out + i * n;
        for (std::size_t j = 0; j < n; ++j) oi[j] = beta * bi[j] + row[j];
    }
}

template <typename T> void run(T *matrix, std::size_t rows, std::size_t cols, const NewtonSchulz &ns) {
    if (rows == 0 || cols == 0) return;
    const bool tall = rows > cols;
    const std::size_t m = tall ? cols : rows, n = tall ? rows : cols;
    std::vector<T> x(m * n), next(m * n), a(m * m), a2(m * m), b(m * m);
    if (tall) {
        for (std::size_t i = 0; i < rows; ++i)
            for (std::size_t j = 0; j < cols; ++j) x[j * n + i] = matrix[i * cols + j];
    } else {
        std::copy(matrix, matrix + rows * cols, x.begin());
    }
    double norm2 = 0.0;
    for (const T v : x) norm2 += double(v) * double(v);
    const T norm = T(std::max(std::sqrt(norm2), ns.eps));
    for (T &v : x) v /= norm;
    const T ca = T(ns.a), cb = T(ns.b), cc = T(ns.c);
    for (int step = 0; step < ns.steps; ++step) {
        gram(x.data(), m, m ? n : 0, a.data());
        // a2 = a a (a is symmetric: a2 = gram of a's rows)
        gram(a.data(), m, m, a2.data());
        for (std::size_t i = 0; i < m * m; ++i) b[i] = cb * a[i] + cc * a2[i];
        multiply_add(b.data(), x.data(), m, n, ca, x.data(), next.data());
        x.swap(next);
    }
    if (tall) {
        for (std::size_t i = 0; i < rows; ++i)
            for (std::size_t j = 0; j < cols; ++j) matrix[i * cols + j] = x[j * n + i];
    } else {
        std::copy(x.begin(), x.end(), matrix);
    }
}

} // namespace

void newton_schulz(float *matrix, std::size_t rows, std::size_t cols, const NewtonSchulz &ns) {
    run(matrix, rows, cols, ns);
}
void newton_schulz(double *matrix, std::size_t rows, std::size_t cols, const NewtonSchulz &ns) {
    run(matrix, rows, cols, ns);
}

double newton_schulz_cost(std::size_t rows, std::size_t cols, int steps) {
    const double m = double(std::min(rows, cols)), n = double(std::max(rows, cols));
    return double(std::max(steps, 1)) * (2.0 * m * m * n + m * m * m) + m * n;
}

} // namespace shardopt

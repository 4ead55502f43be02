// Adafactor (torch.optim.Adafactor: Shazeer & Stern 2018 with torch's defaults and formula).
// Matrices (ParameterSet::add_matrix) keep a factored second moment: a variance per row and per
// column (Segment::tensor_state, rows then cols values), which every rank holding part of the
// matrix keeps whole; other tensors keep one per element (slot 0).
//
// A step needs sums over the whole tensor, which may be cut across ranks, so it has three phases
// (the caller combines each phase's statistics across the slices in between, like LAMB's):
//   0. begin_step     |p|^2 (before weight decay), and for a matrix the sums of g^2 per row and
//                     per column of this slice's elements;
//   1. continue_step  the row/column variances (or the per-element variance) advance:
//                     var = lerp(var, mean g^2, t^beta2_decay); the update
//                     u = g / sqrt(max(row_var[i] col_var[j] / max(eps1, mean(row_var)), eps1^2))
//                     and its |u|^2;
//   2. apply          p = p (1 - lr wd) - alpha / max(1, |u| / (sqrt(n) d)) u, with
//                     alpha = max(eps2, |p| / sqrt(n)) min(lr, 1 / sqrt(t)).
// eps (torch's eps1) 0 means the parameters' machine epsilon (torch's None).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#include "kernel_support.hpp"
#include "rules.hpp"

namespace shardopt {
namespace {

using optim_kernels::check_segment;
using optim_kernels::gradient_sign;

// torch.lerp: exact at weight 1 (the first step's variance is the mean itself).
template <typename T> T lerp(T start, T end, T weight) {
    return weight < T(0.5) ? start + weight * (end - start) : end - (end - start) * (T(1) - weight);
}

// Row runs of a slice of a rows x cols matrix: f(first, n, row, col) for elements [first, first+n)
// of the slice, which lie in `row` from column `col` on.
template <class F> void for_each_row_run(std::size_t offset, std::size_t count, std::size_t cols, F &&f) {
    std::size_t i = 0;
    while (i < count) {
        const std::size_t e = offset + i, row = e / cols, col = e % cols;
        const std::size_t n = std::min(count - i, cols - col);
        f(i, n, row, col);
        i += n;
    }
}

class Adafactor final : public Optimizer {
  public:
    explicit Adafactor(const OptimizerOptions &options) : Optimizer(options) {}

    int state_slots() const override { return 1; }
    int state_slots(const TensorShape &shape) const override { return shape.matrix() ? 0 : 1; }
    std::size_t tensor_state(const TensorShape &shape) const override {
        return shape.matrix() ? shape.rows + shape.cols() : 0;
    }
    int stat_phases() const override { return 2; }
    std::size_t phase_stats(int phase, const TensorShape &shape) const override {
        if (phase == 0 && shape.matrix()) return 1 + shape.rows + shape.cols();
        return 1;
    }

    void begin_step(const Segment<float> &seg, int64_t step, double *stats) const override { sums(seg, step, stats); }
    void begin_step(const Segment<double> &seg, int64_t step, double *stats) const override { sums(seg, step, stats); }
    void continue_step(int phase, const Segment<float> &seg, int64_t step, double *stats) const override {
        variances(phase, seg, step, stats);
    }
    void continue_step(int phase, const Segment<double> &seg, int64_t step, double *stats) const override {
        variances(phase, seg, step, stats);
    }
    void apply(const Segment<float> &seg, int64_t step, const double *stats) const override { move(seg, step, stats); }
    void apply(const Segment<double> &seg, int64_t step, const double *stats) const override { move(seg, step, stats); }

  private:
    template <typename T> bool is_matrix(const Segment<T> &seg) const { return seg.shape.matrix(); }
    template <typename T> T eps1() const {
        return options_.eps > 0.0 ? T(options_.eps) : std::numeric_limits<T>::epsilon();
    }

    template <typename T> void check(const Segment<T> &seg, int64_t step, const double *stats) const {
        check_segment(seg, state_slots(seg.shape), step);
        require(stats != nullptr, ErrorCode::invalid_argument, "adafactor needs per-tensor statistics (stats is null)");
        require(!is_matrix(seg) || seg.tensor_state != nullptr || seg.count == 0, ErrorCode::invalid_argument,
                "adafactor: a matrix slice without its row and column variances (tensor_state)");
        require(!is_matrix(seg) || seg.shape.count == seg.shape.rows * seg.shape.cols(), ErrorCode::invalid_argument,
                "adafactor: matrix shape does not match its element count");
    }

    // Phase 0: |p|^2 and the slice's g^2 sums per row and column.
    template <typename T> void sums(const Segment<T> &seg, int64_t step, double *stats) const {
        check(seg, step, stats);
        double *s = stats + seg.stats[0];
        double p2 = 0.0;
        for (std::size_t i = 0; i < seg.count; ++i) p2 += double(seg.param[i]) * double(seg.param[i]);
        s[0] += p2;
        if (!is_matrix(seg)) return;
        const std::size_t rows = seg.shape.rows, cols = seg.shape.cols();
        double *row_sums = s + 1, *col_sums = s + 1 + rows;
        for_each_row_run(seg.offset, seg.count, cols, [&](std::size_t first, std::size_t n, std::size_t row, std::size_t col) {
            double r = 0.0;
            for (std::size_t j = 0; j < n; ++j) {
                const double g = double(seg.grad[first + j]);
                r += g * g;
                col_sums[col + j] += g * g;
            }
            row_sums[row] += r;
        });
    }

    // The update of element i (its variance already advanced): g / sqrt(max(var, eps1^2)).
    template <typename T> struct Direction {
        T sign, eps1_squared, row_factor; // row_factor: max(eps1, mean(row_var)) (matrices)
        const T *row_var, *col_var;
    };

    template <typename T, class F> void for_each_update(const Segment<T> &seg, const Direction<T> &d, F &&f) const {
        const T *__restrict grad = seg.grad;
        if (!is_matrix(seg)) {
            const T *__restrict variance = seg.state[0];
            for (std::size_t i = 0; i < seg.count; ++i) {
                const T g = d.sign * grad[i];
                const T v = std::max(variance[i], d.eps1_squared);
                f(i, (T(1) / std::sqrt(v)) * g);
            }
            return;
        }
        for_each_row_run(seg.offset, seg.count, seg.shape.cols(),
                         [&](std::size_t first, std::size_t n, std::size_t row, std::size_t col) {
                             const T r = d.row_var[row];
                             for (std::size_t j = 0; j < n; ++j) {
                                 const T g = d.sign * grad[first + j];
                                 const T v = std::max(r * d.col_var[col + j] / d.row_factor, d.eps1_squared);
                                 f(first + j, (T(1) / std::sqrt(v)) * g);
                             }
                         });
    }

    template <typename T> Direction<T> direction(const Segment<T> &seg) const {
        Direction<T> d{T(gradient_sign(options_)), T(double(eps1<T>()) * double(eps1<T>())), T(1), nullptr, nullptr};
        if (is_matrix(seg) && seg.count > 0) {
            const std::size_t rows = seg.shape.rows;
            d.row_var = seg.tensor_state;
            d.col_var = seg.tensor_state + rows;
            double mean = 0.0;
            for (std::size_t r = 0; r < rows; ++r) mean += double(d.row_var[r]);
            d.row_factor = std::max(T(mean / double(rows)), eps1<T>());
        }
        return d;
    }

    // Phase 1: the variances advance; |u|^2 of this slice.
    template <typename T> void variances(int phase, const Segment<T> &seg, int64_t step, double *stats) const {
        require(phase == 1, ErrorCode::internal, "adafactor has phases 0 to 2");
        check(seg, step, stats);
        if (seg.count == 0) return;
        const T beta2_t = T(std::pow(double(step), options_.beta2_decay));
        const T sign = T(gradient_sign(options_));
        if (is_matrix(seg)) {
            const std::size_t rows = seg.shape.rows, cols = seg.shape.cols();
            const double *row_sums = stats + seg.stats[0] + 1, *col_sums = row_sums + rows;
            T *row_var = seg.tensor_state, *col_var = seg.tensor_state + rows;
            for (std::size_t r = 0; r < rows; ++r) row_var[r] = lerp(row_var[r], T(row_sums[r] / double(cols)), beta2_t);
            for (std::size_t c = 0; c < cols; ++c) col_var[c] = lerp(col_var[c], T(col_sums[c] / double(rows)), beta2_t);
        } else {
            T *variance = seg.state[0];
            for (std::size_t i = 0; i < seg.count; ++i) {
                const T g = sign * seg.grad[i];
                variance[i] = lerp(variance[i], g * g, beta2_t);
            }
        }
        double u2 = 0.0;
        for_each_update(seg, direction(seg), [&](std::size_t, T u) { u2 += double(u) * double(u); });
        stats[seg.stats[1]] += u2;
    }

    // Phase 2: the parameters move.
    template <typename T> void move(const Segment<T> &seg, int64_t step, const double *stats) const {
        check(seg, step, stats);
        if (seg.count == 0) return;
        const OptimizerOptions &o = options_;
        const double t = double(step), n = double(seg.tensor_count());
        const double rho_t = std::min(o.lr, 1.0 / std::sqrt(t));
        const double alpha = std::max(o.eps2, std::sqrt(stats[seg.stats[0]]) / std::sqrt(n)) * rho_t;
        const double denom = std::max(1.0, std::sqrt(stats[seg.stats[1]]) / (std::sqrt(n) * o.clip_threshold));
        const T coefficient = T(-alpha / denom);
        const T decay = T(1.0 - o.lr * o.weight_decay);
        const bool decays = o.weight_decay != 0.0;
        T *param = seg.param;
        for_each_update(seg, direction(seg), [&](std::size_t i, T u) {
            T p = param[i];
            if (decays) p *= decay;
            param[i] = p + coefficient * u;
        });
    }
};

} // namespace

std::unique_ptr<Optimizer> make_adafactor(const OptimizerOptions &options) {
    return std::make_unique<Adafactor>(options);
}

} // namespace shardopt

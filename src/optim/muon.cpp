// Muon (torch.optim.Muon) on matrices, AdamW (torch.optim.AdamW, adamw_lr / adamw_weight_decay /
// adamw_eps and beta1, beta2) on every other tensor, as torch.optim.Muon's documentation pairs
// them. On a rows x cols matrix (ParameterSet::add_matrix), state slot 0 the momentum buffer B:
//   B = lerp(B, g, 1 - momentum);  U = nesterov ? lerp(g, B, momentum) : B      (begin_step)
//   O = NewtonSchulz(U)  over the whole matrix, once per step   (transform_matrix, by one owner)
//   p = p (1 - lr wd) - lr * adjust(rows, cols) * O                              (apply)
// A schedule's set_lr scales adamw_lr by the same factor as lr.
#include <cmath>
#include <cstddef>

#include "kernel_support.hpp"
#include "newton_schulz.hpp"
#include "rules.hpp"

namespace shardopt {
namespace {

using optim_kernels::check_segment;
using optim_kernels::gradient_sign;

// torch.lerp's two forms.
template <typename T> T lerp(T start, T end, T weight) {
    return weight < T(0.5) ? start + weight * (end - start) : end - (end - start) * (T(1) - weight);
}

OptimizerOptions adamw_part(const OptimizerOptions &o) {
    OptimizerOptions a = OptimizerOptions::defaults(OptimizerKind::adamw);
    a.lr = o.adamw_lr;
    a.weight_decay = o.adamw_weight_decay;
    a.eps = o.adamw_eps;
    a.beta1 = o.beta1;
    a.beta2 = o.beta2;
    a.maximize = o.maximize;
    return a;
}

class Muon final : public Optimizer {
  public:
    explicit Muon(const OptimizerOptions &options)
        : Optimizer(options), initial_lr_(options.lr), adamw_(make_adam(adamw_part(options))) {}

    int state_slots() const override { return 2; }
    int state_slots(const TensorShape &shape) const override { return shape.matrix() ? 1 : 2; }
    bool transforms_matrices() const override { return true; }

    void transform_matrix(float *data, std::size_t rows, std::size_t cols) const override {
        newton_schulz(data, rows, cols, ns());
    }
    void transform_matrix(double *data, std::size_t rows, std::size_t cols) const override {
        newton_schulz(data, rows, cols, ns());
    }

    void begin_step(const Segment<float> &seg, int64_t step, double *) const override { momentum(seg, step); }
    void begin_step(const Segment<double> &seg, int64_t step, double *) const override { momentum(seg, step); }
    void apply(const Segment<float> &seg, int64_t step, const double *stats) const override { move(seg, step, stats); }
    void apply(const Segment<double> &seg, int64_t step, const double *stats) const override { move(seg, step, stats); }

    // lr times the shape's adjustment (torch.optim.Muon's _adjust_lr).
    static double adjusted_lr(double lr, MuonLrAdjust adjust, double rows, double cols) {
        switch (adjust) {
        case MuonLrAdjust::original: return lr * std::sqrt(std::max(1.0, rows / cols));
        case MuonLrAdjust::match_rms_adamw: return lr * 0.2 * std::sqrt(std::max(rows, cols));
        case MuonLrAdjust::spectral_unclamped: return lr * std::sqrt(rows / cols);
        }
        return lr;
    }

  private:
    NewtonSchulz ns() const {
        const OptimizerOptions &o = options_;
        return NewtonSchulz{o.ns_steps, o.ns_a, o.ns_b, o.ns_c, o.eps};
    }

    void lr_changed() override {
        adamw_->set_lr(initial_lr_ > 0.0 ? options_.adamw_lr * (options_.lr / initial_lr_) : options_.adamw_lr);
    }

    template <typename T> void check_matrix(const Segment<T> &seg, int64_t step) const {
        check_segment(seg, 1, step);
        require(seg.count == 0 || seg.matrix != nullptr, ErrorCode::invalid_argument,
                "muon: a matrix slice needs Segment::matrix (the whole-matrix buffer)");
    }

    template <typename T> void momentum(const Segment<T> &seg, int64_t step) const {
        if (!seg.shape.matrix()) return; // AdamW: element-wise, all in apply
        check_matrix(seg, step);
        const OptimizerOptions &o = options_;
        const T sign = T(gradient_sign(o)), mu = T(o.momentum), one_minus_mu = T(1.0 - o.momentum);
        T *__restrict buffer = seg.state[0];
        T *__restrict out = seg.matrix;
        const T *__restrict grad = seg.grad;
        for (std::size_t i = 0; i < seg.count; ++i) {
            const T g = sign * grad[i];
            const T b = lerp(buffer[i], g, one_minus_mu);
            buffer[i] = b;
            out[i] = o.nesterov ? lerp(g, b, mu) : b;
        }
    }

    template <typename T> void move(const Segment<T> &seg, int64_t step, const double *stats) const {
        if (!seg.shape.matrix()) return adamw_->apply(seg, step, stats);
        check_matrix(seg, step);
        const OptimizerOptions &o = options_;
        const T decay = T(1.0 - o.lr * o.weight_decay);
        const T rate = T(-adjusted_lr(o.lr, o.adjust_lr, double(seg.shape.rows), double(seg.shape.cols())));
        T *__restrict param = seg.param;
        const T *__restrict update = seg.matrix;
        for (std::size_t i = 0; i < seg.count; ++i) param[i] = param[i] * decay + rate * update[i];
    }

    double initial_lr_;
    std::unique_ptr<Optimizer> adamw_;
};

} // namespace

std::unique_ptr<Optimizer> make_muon(const OptimizerOptions &options) { return std::make_unique<Muon>(options); }

} // namespace shardopt

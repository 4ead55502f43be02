// LAMB (You et al. 2019, "Large Batch Optimization for Deep Learning"): the bias-corrected Adam
// direction plus decoupled weight decay, r = m_hat / (sqrt(v_hat) + eps) + weight_decay * p,
// scaled per tensor by the trust ratio |p| / |r| (1 when either norm is 0): p -= lr * trust * r.
// State: slot 0 the first moment m, slot 1 the second moment v.
//
// The norms span a whole tensor, which may be cut across ranks, so a step has two phases:
// begin_step advances m and v and adds |p|^2 and |r|^2 of its slice into the statistics; once
// the caller has summed them over all slices, apply recomputes r from the already-advanced state
// (the same code, so the same values) and moves p.
#include <cmath>
#include <cstddef>

#include "kernel_support.hpp"
#include "rules.hpp"

namespace shardopt {
namespace {

using optim_kernels::check_segment;
using optim_kernels::gradient_sign;
using optim_kernels::with_flags;

constexpr int kParamNormSquared = 0;
constexpr int kUpdateNormSquared = 1;
constexpr int kStatsPerTensor = 2;

template <typename T> struct LambScalars {
    T sign, weight_decay, one_minus_beta1, beta2, one_minus_beta2, bias_correction1, bias_correction2, eps;
};

template <typename T, class Decay> T direction(T m, T v, T p, const LambScalars<T> &k, Decay) {
    T r = (m / k.bias_correction1) / (std::sqrt(v / k.bias_correction2) + k.eps);
    if constexpr (Decay::value) r += k.weight_decay * p;
    return r;
}

template <typename T, class Decay>
void advance_moments(const Segment<T> &seg, const LambScalars<T> &k, double *stats, Decay decay) {
    const T *__restrict param = seg.param;
    const T *__restrict grad = seg.grad;
    T *__restrict m = seg.state[0];
    T *__restrict v = seg.state[1];
    double param_norm_squared = 0.0;
    double update_norm_squared = 0.0;
    for (std::size_t i = 0; i < seg.count; ++i) {
        T g = k.sign * grad[i];
        T m_i = m[i] + k.one_minus_beta1 * (g - m[i]);
        T v_i = v[i] * k.beta2 + k.one_minus_beta2 * g * g;
        m[i] = m_i;
        v[i] = v_i;
        double p = param[i];
        double r = direction(m_i, v_i, param[i], k, decay);
        param_norm_squared += p * p;
        update_norm_squared += r * r;
    }
    stats[seg.stats[0] + kParamNormSquared] += param_norm_squared;
    stats[seg.stats[0] + kUpdateNormSquared] += update_norm_squared;
}

template <typename T, class Decay>
void move_params(const Segment<T> &seg, const LambScalars<T> &k, T scaled_lr, Decay decay) {
    T *__restrict param = seg.param;
    const T *__restrict m = seg.state[0];
    const T *__restrict v = seg.state[1];
    for (std::size_t i = 0; i < seg.count; ++i) param[i] -= scaled_lr * direction(m[i], v[i], param[i], k, decay);
}

class Lamb final : public Optimizer {
  public:
    explicit Lamb(const OptimizerOptions &options) : Optimizer(options) {}

    int state_slots() const override { return 2; }
    int tensor_stats() const override { return kStatsPerTensor; }
    void begin_step(const Segment<float> &seg, int64_t step, double *stats) const override {
        first_phase(seg, step, stats);
    }
    void begin_step(const Segment<double> &seg, int64_t step, double *stats) const override {
        first_phase(seg, step, stats);
    }
    void apply(const Segment<float> &seg, int64_t step, const double *stats) const override {
        second_phase(seg, step, stats);
    }
    void apply(const Segment<double> &seg, int64_t step, const double *stats) const override {
        second_phase(seg, step, stats);
    }

  private:
    template <typename T> LambScalars<T> scalars(int64_t step) const {
        const OptimizerOptions &o = options_;
        const double t = double(step);
        return {T(gradient_sign(o)),
                T(o.weight_decay),
                T(1.0 - o.beta1),
                T(o.beta2),
                T(1.0 - o.beta2),
                T(1.0 - std::pow(o.beta1, t)),
                T(1.0 - std::pow(o.beta2, t)),
                T(o.eps)};
    }

    template <typename T> void check(const Segment<T> &seg, int64_t step, const double *stats) const {
        check_segment(seg, state_slots(), step);
        require(stats != nullptr, ErrorCode::invalid_argument, "lamb needs per-tensor statistics (stats is null)");
    }

    template <typename T> void first_phase(const Segment<T> &seg, int64_t step, double *stats) const {
        check(seg, step, stats);
        const LambScalars<T> k = scalars<T>(step);
        with_flags([&](auto decay) { advance_moments(seg, k, stats, decay); }, options_.weight_decay != 0.0);
    }

    template <typename T> void second_phase(const Segment<T> &seg, int64_t step, const double *stats) const {
        check(seg, step, stats);
        const double param_norm = std::sqrt(stats[seg.stats[0] + kParamNormSquared]);
        const double update_norm = std::sqrt(stats[seg.stats[0] + kUpdateNormSquared]);
        const double trust = param_norm > 0.0 && update_norm > 0.0 ? param_norm / update_norm : 1.0;
        const LambScalars<T> k = scalars<T>(step);
        const T scaled_lr = T(options_.lr * trust);
        with_flags([&](auto decay) { move_params(seg, k, scaled_lr, decay); }, options_.weight_decay != 0.0);
    }
};

} // namespace

std::unique_ptr<Optimizer> make_lamb(const OptimizerOptions &options) { return std::make_unique<Lamb>(options); }

} // namespace shardopt

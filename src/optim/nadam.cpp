// NAdam (torch.optim.NAdam), with L2 or decoupled weight decay. State: slot 0 the first moment m,
// slot 1 the second moment v; the product of the momentum schedule mu_1 ... mu_t, which torch
// keeps per parameter, follows from the step count and is computed here (in double).
//   mu_t = beta1 * (1 - 0.5 * 0.96^(t * momentum_decay))
//   m = lerp(m, g, 1 - beta1);  v = beta2 * v + (1 - beta2) * g^2;  d = sqrt(v / (1 - beta2^t)) + eps
//   p -= lr * (1 - mu_t) / (1 - prod mu_1..t) * g / d + lr * mu_{t+1} / (1 - prod mu_1..t+1) * m / d
#include <cmath>
#include <cstddef>
#include <mutex>

#include "kernel_support.hpp"
#include "rules.hpp"

namespace shardopt {
namespace {

using optim_kernels::check_segment;
using optim_kernels::gradient_sign;
using optim_kernels::with_flags;

template <typename T> struct NadamScalars {
    T sign, weight_decay, decay_factor, one_minus_beta1, beta2, one_minus_beta2, bias_correction2, eps;
    T grad_coefficient, momentum_coefficient; // -lr (1 - mu) / (1 - prod), -lr mu_next / (1 - prod_next)
};

template <typename T, class L2, class Decoupled>
void update(const Segment<T> &seg, const NadamScalars<T> &k, L2, Decoupled) {
    T *__restrict param = seg.param;
    const T *__restrict grad = seg.grad;
    T *__restrict m = seg.state[0];
    T *__restrict v = seg.state[1];
    for (std::size_t i = 0; i < seg.count; ++i) {
        T p = param[i];
        if constexpr (Decoupled::value) p *= k.decay_factor;
        T g = k.sign * grad[i];
        if constexpr (L2::value) g += k.weight_decay * p;
        const T m_i = m[i] + k.one_minus_beta1 * (g - m[i]);
        const T v_i = v[i] * k.beta2 + k.one_minus_beta2 * g * g;
        m[i] = m_i;
        v[i] = v_i;
        const T denom = std::sqrt(v_i / k.bias_correction2) + k.eps;
        p = p + k.grad_coefficient * g / denom;
        param[i] = p + k.momentum_coefficient * m_i / denom;
    }
}

class Nadam final : public Optimizer {
  public:
    explicit Nadam(const OptimizerOptions &options) : Optimizer(options) {}

    int state_slots() const override { return 2; }
    void apply(const Segment<float> &seg, int64_t step, const double *) const override { run(seg, step); }
    void apply(const Segment<double> &seg, int64_t step, const double *) const override { run(seg, step); }

  private:
    double mu(int64_t t) const {
        return options_.beta1 * (1.0 - 0.5 * std::pow(0.96, double(t) * options_.momentum_decay));
    }

    // prod mu_1 .. mu_t, kept from the last call: O(1) per step, from scratch after a restore.
    double mu_product(int64_t t) const {
        std::lock_guard<std::mutex> lock(mutex_);
        if (product_step_ > t) {
            product_step_ = 0;
            product_ = 1.0;
        }
        while (product_step_ < t) product_ *= mu(++product_step_);
        return product_;
    }

    template <typename T> void run(const Segment<T> &seg, int64_t step) const {
        check_segment(seg, state_slots(), step);
        const OptimizerOptions &o = options_;
        const double mu_t = mu(step), mu_next = mu(step + 1);
        const double product = mu_product(step), product_next = product * mu_next;
        const NadamScalars<T> k{T(gradient_sign(o)),
                                T(o.weight_decay),
                                T(1.0 - o.lr * o.weight_decay),
                                T(1.0 - o.beta1),
                                T(o.beta2),
                                T(1.0 - o.beta2),
                                T(1.0 - std::pow(o.beta2, double(step))),
                                T(o.eps),
                                T(-o.lr * (1.0 - mu_t) / (1.0 - product)),
                                T(-o.lr * mu_next / (1.0 - product_next))};
        const bool decay = o.weight_decay != 0.0;
        with_flags([&](auto l2, auto dec) { update(seg, k, l2, dec); }, decay && !o.decoupled_weight_decay,
                   decay && o.decoupled_weight_decay);
    }

    mutable std::mutex mutex_;
    mutable std::int64_t product_step_ = 0;
    mutable double product_ = 1.0;
};

} // namespace

std::unique_ptr<Optimizer> make_nadam(const OptimizerOptions &options) { return std::make_unique<Nadam>(options); }

} // namespace shardopt

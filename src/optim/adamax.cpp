// Adamax (torch.optim.Adamax): Adam with the infinity norm. State: slot 0 the first moment m,
// slot 1 the exponentially weighted infinity norm u.
//   m = lerp(m, g, 1 - beta1);  u = max(beta2 * u, |g| + eps);  p -= lr / (1 - beta1^t) * m / u
#include <cmath>
#include <cstddef>

#include "kernel_support.hpp"
#include "rules.hpp"

namespace shardopt {
namespace {

using optim_kernels::check_segment;
using optim_kernels::gradient_sign;
using optim_kernels::with_flags;

template <typename T> struct AdamaxScalars {
    T sign, weight_decay, one_minus_beta1, beta2, eps, step_size;
};

template <typename T, class Decay> void update(const Segment<T> &seg, const AdamaxScalars<T> &k, Decay) {
    T *__restrict param = seg.param;
    const T *__restrict grad = seg.grad;
    T *__restrict m = seg.state[0];
    T *__restrict u = seg.state[1];
    for (std::size_t i = 0; i < seg.count; ++i) {
        T g = k.sign * grad[i];
        if constexpr (Decay::value) g += k.weight_decay * param[i];
        const T m_i = m[i] + k.one_minus_beta1 * (g - m[i]);
        const T decayed = u[i] * k.beta2, bound = std::fabs(g) + k.eps;
        const T u_i = decayed < bound ? bound : decayed; // torch.maximum (NaN-propagation aside)
        m[i] = m_i;
        u[i] = u_i;
        param[i] -= k.step_size * m_i / u_i;
    }
}

class Adamax final : public Optimizer {
  public:
    explicit Adamax(const OptimizerOptions &options) : Optimizer(options) {}

    int state_slots() const override { return 2; }
    void apply(const Segment<float> &seg, int64_t step, const double *) const override { run(seg, step); }
    void apply(const Segment<double> &seg, int64_t step, const double *) const override { run(seg, step); }

  private:
    template <typename T> void run(const Segment<T> &seg, int64_t step) const {
        check_segment(seg, state_slots(), step);
        const OptimizerOptions &o = options_;
        const double bias_correction = 1.0 - std::pow(o.beta1, double(step));
        const AdamaxScalars<T> k{T(gradient_sign(o)), T(o.weight_decay), T(1.0 - o.beta1),
                                 T(o.beta2),          T(o.eps),          T(o.lr / bias_correction)};
        with_flags([&](auto decay) { update(seg, k, decay); }, o.weight_decay != 0.0);
    }
};

} // namespace

std::unique_ptr<Optimizer> make_adamax(const OptimizerOptions &options) { return std::make_unique<Adamax>(options); }

} // namespace shardopt

// Lion (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms"), as lucidrains'
// lion-pytorch writes it: the sign of an interpolation of momentum and gradient, decoupled
// weight decay, then the momentum's own update. State: slot 0 the momentum m.
//   c = beta1 * m + (1 - beta1) * g;  p = p * (1 - lr * wd) - lr * sign(c);  m = beta2 * m + (1 - beta2) * g
#include <cstddef>

#include "kernel_support.hpp"
#include "rules.hpp"

namespace shardopt {
namespace {

using optim_kernels::check_segment;
using optim_kernels::gradient_sign;
using optim_kernels::with_flags;

template <typename T> struct LionScalars {
    T sign, lr, decay_factor, beta1, one_minus_beta1, beta2, one_minus_beta2;
};

// torch.sign: -1, 0 or 1 (NaN stays NaN).
template <typename T> T sign_of(T c) { return c > T(0) ? T(1) : c < T(0) ? T(-1) : c * T(0); }

template <typename T, class Decay> void update(const Segment<T> &seg, const LionScalars<T> &k, Decay) {
    T *__restrict param = seg.param;
    const T *__restrict grad = seg.grad;
    T *__restrict m = seg.state[0];
    for (std::size_t i = 0; i < seg.count; ++i) {
        const T g = k.sign * grad[i];
        const T c = m[i] * k.beta1 + k.one_minus_beta1 * g;
        T p = param[i];
        if constexpr (Decay::value) p *= k.decay_factor;
        param[i] = p - k.lr * sign_of(c);
        m[i] = m[i] * k.beta2 + k.one_minus_beta2 * g;
    }
}

class Lion final : public Optimizer {
  public:
    explicit Lion(const OptimizerOptions &options) : Optimizer(options) {}

    int state_slots() const override { return 1; }
    void apply(const Segment<float> &seg, int64_t step, const double *) const override { run(seg, step); }
    void apply(const Segment<double> &seg, int64_t step, const double *) const override { run(seg, step); }

  private:
    template <typename T> void run(const Segment<T> &seg, int64_t step) const {
        check_segment(seg, state_slots(), step);
        const OptimizerOptions &o = options_;
        const LionScalars<T> k{T(gradient_sign(o)), T(o.lr),   T(1.0 - o.lr * o.weight_decay), T(o.beta1),
                               T(1.0 - o.beta1),    T(o.beta2), T(1.0 - o.beta2)};
        with_flags([&](auto decay) { update(seg, k, decay); }, o.weight_decay != 0.0);
    }
};

} // namespace

std::unique_ptr<Optimizer> make_lion(const OptimizerOptions &options) { return std::make_unique<Lion>(options); }

} // namespace shardopt

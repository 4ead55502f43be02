// RMSprop (torch.optim.RMSprop), optionally centered and with momentum. State: slot 0 the
// running average of g^2, then the momentum buffer (momentum > 0), then the running average
// of g (centered), in that order.
#include <cmath>
#include <cstddef>

#include "kernel_support.hpp"
#include "rules.hpp"

namespace shardopt {
namespace {

using optim_kernels::check_segment;
using optim_kernels::gradient_sign;
using optim_kernels::with_flags;

template <typename T> struct RmspropScalars {
    T sign, lr, weight_decay, alpha, one_minus_alpha, eps, momentum;
};

template <typename T, class Decay, class Momentum, class Centered>
void update(const Segment<T> &seg, const RmspropScalars<T> &k, Decay, Momentum, Centered) {
    T *__restrict param = seg.param;
    const T *__restrict grad = seg.grad;
    T *__restrict square_avg = seg.state[0];
    T *__restrict buffer = seg.state[1];
    T *__restrict grad_avg = seg.state[Momentum::value ? 2 : 1];
    for (std::size_t i = 0; i < seg.count; ++i) {
        T g = k.sign * grad[i];
        if constexpr (Decay::value) g += k.weight_decay * param[i];
        T sq = square_avg[i] * k.alpha + k.one_minus_alpha * g * g;
        square_avg[i] = sq;
        T avg;
        if constexpr (Centered::value) {
            T ga = grad_avg[i] + k.one_minus_alpha * (g - grad_avg[i]); // torch's lerp(ga, g, 1 - alpha)
            grad_avg[i] = ga;
            avg = std::sqrt(sq - ga * ga) + k.eps;
        } else {
            avg = std::sqrt(sq) + k.eps;
        }
        if constexpr (Momentum::value) {
            T b = buffer[i] * k.momentum + g / avg;
            buffer[i] = b;
            param[i] -= k.lr * b;
        } else {
            param[i] -= k.lr * g / avg;
        }
    }
}

class Rmsprop final : public Optimizer {
  public:
    explicit Rmsprop(const OptimizerOptions &options) : Optimizer(options) {}

    int state_slots() const override { return 1 + (has_momentum() ? 1 : 0) + (options_.centered ? 1 : 0); }
    void apply(const Segment<float> &seg, int64_t step, const double *) const override { run(seg, step); }
    void apply(const Segment<double> &seg, int64_t step, const double *) const override { run(seg, step); }

  private:
    bool has_momentum() const { return options_.momentum > 0.0; }

    template <typename T> void run(const Segment<T> &seg, int64_t step) const {
        check_segment(seg, state_slots(), step);
        const OptimizerOptions &o = options_;
        const RmspropScalars<T> k{T(gradient_sign(o)), T(o.lr),  T(o.weight_decay), T(o.alpha),
                                  T(1.0 - o.alpha),    T(o.eps), T(o.momentum)};
        with_flags([&](auto decay, auto momentum, auto centered) { update(seg, k, decay, momentum, centered); },
                   o.weight_decay != 0.0, has_momentum(), o.centered);
    }
};

} // namespace

std::unique_ptr<Optimizer> make_rmsprop(const OptimizerOptions &options) {
    return std::make_unique<Rmsprop>(options);
}

} // namespace shardopt

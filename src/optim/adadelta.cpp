// Adadelta (torch.optim.Adadelta). State: slot 0 the running average of g^2, slot 1 the running
// average of the squared updates.
//   s = rho * s + (1 - rho) * g^2;  d = sqrt(a + eps) / sqrt(s + eps) * g;
//   a = rho * a + (1 - rho) * d^2;  p -= lr * d
#include <cmath>
#include <cstddef>

#include "kernel_support.hpp"
#include "rules.hpp"

namespace shardopt {
namespace {

using optim_kernels::check_segment;
using optim_kernels::gradient_sign;
using optim_kernels::with_flags;

template <typename T> struct AdadeltaScalars {
    T sign, lr, weight_decay, rho, one_minus_rho, eps;
};

template <typename T, class Decay> void update(const Segment<T> &seg, const AdadeltaScalars<T> &k, Decay) {
    T *__restrict param = seg.param;
    const T *__restrict grad = seg.grad;
    T *__restrict square_avg = seg.state[0];
    T *__restrict acc_delta = seg.state[1];
    for (std::size_t i = 0; i < seg.count; ++i) {
        T g = k.sign * grad[i];
        if constexpr (Decay::value) g += k.weight_decay * param[i];
        const T s = square_avg[i] * k.rho + k.one_minus_rho * g * g;
        square_avg[i] = s;
        const T delta = std::sqrt(acc_delta[i] + k.eps) / std::sqrt(s + k.eps) * g;
        acc_delta[i] = acc_delta[i] * k.rho + k.one_minus_rho * delta * delta;
        param[i] -= k.lr * delta;
    }
}

class Adadelta final : public Optimizer {
  public:
    explicit Adadelta(const OptimizerOptions &options) : Optimizer(options) {}

    int state_slots() const override { return 2; }
    void apply(const Segment<float> &seg, int64_t step, const double *) const override { run(seg, step); }
    void apply(const Segment<double> &seg, int64_t step, const double *) const override { run(seg, step); }

  private:
    template <typename T> void run(const Segment<T> &seg, int64_t step) const {
        check_segment(seg, state_slots(), step);
        const OptimizerOptions &o = options_;
        const AdadeltaScalars<T> k{T(gradient_sign(o)), T(o.lr), T(o.weight_decay), T(o.rho), T(1.0 - o.rho), T(o.eps)};
        with_flags([&](auto decay) { update(seg, k, decay); }, o.weight_decay != 0.0);
    }
};

} // namespace

std::unique_ptr<Optimizer> make_adadelta(const OptimizerOptions &options) {
    return std::make_unique<Adadelta>(options);
}

} // namespace shardopt

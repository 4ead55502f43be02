// Adagrad (torch.optim.Adagrad). State: slot 0 the running sum of g^2, which starts at
// initial_accumulator_value.
#include <cmath>
#include <cstddef>

#include "kernel_support.hpp"
#include "rules.hpp"

namespace shardopt {
namespace {

using optim_kernels::check_segment;
using optim_kernels::gradient_sign;
using optim_kernels::with_flags;

template <typename T> struct AdagradScalars {
    T sign, decayed_lr, weight_decay, eps;
};

template <typename T, class Decay> void update(const Segment<T> &seg, const AdagradScalars<T> &k, Decay) {
    T *__restrict param = seg.param;
    const T *__restrict grad = seg.grad;
    T *__restrict sum = seg.state[0];
    for (std::size_t i = 0; i < seg.count; ++i) {
        T g = k.sign * grad[i];
        if constexpr (Decay::value) g += k.weight_decay * param[i];
        T s = sum[i] + g * g;
        sum[i] = s;
        param[i] -= k.decayed_lr * g / (std::sqrt(s) + k.eps);
    }
}

class Adagrad final : public Optimizer {
  public:
    explicit Adagrad(const OptimizerOptions &options) : Optimizer(options) {}

    int state_slots() const override { return 1; }
    double state_initial_value(int) const override { return options_.initial_accumulator_value; }
    void apply(const Segment<float> &seg, int64_t step, const double *) const override { run(seg, step); }
    void apply(const Segment<double> &seg, int64_t step, const double *) const override { run(seg, step); }

  private:
    template <typename T> void run(const Segment<T> &seg, int64_t step) const {
        check_segment(seg, state_slots(), step);
        const OptimizerOptions &o = options_;
        const double decayed_lr = o.lr / (1.0 + double(step - 1) * o.lr_decay);
        const AdagradScalars<T> k{T(gradient_sign(o)), T(decayed_lr), T(o.weight_decay), T(o.eps)};
        with_flags([&](auto decay) { update(seg, k, decay); }, o.weight_decay != 0.0);
    }
};

} // namespace

std::unique_ptr<Optimizer> make_adagrad(const OptimizerOptions &options) {
    return std::make_unique<Adagrad>(options);
}

} // namespace shardopt

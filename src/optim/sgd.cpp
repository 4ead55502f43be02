// SGD with optional momentum, dampening, Nesterov momentum, L2 weight decay (torch.optim.SGD).
#include <cstddef>

#include "kernel_support.hpp"
#include "rules.hpp"

namespace shardopt {
namespace {

using optim_kernels::check_segment;
using optim_kernels::gradient_sign;
using optim_kernels::with_flags;

// Hyper-parameters in the element type: computed in double once per call, then rounded.
template <typename T> struct SgdScalars {
    T sign, lr, weight_decay, momentum, one_minus_dampening;
};

template <typename T, class Decay>
void update_without_momentum(const Segment<T> &seg, const SgdScalars<T> &k, Decay) {
    T *__restrict param = seg.param;
    const T *__restrict grad = seg.grad;
    for (std::size_t i = 0; i < seg.count; ++i) {
        T g = k.sign * grad[i];
        if constexpr (Decay::value) g += k.weight_decay * param[i];
        param[i] -= k.lr * g;
    }
}

// The first momentum step starts the buffer at the gradient itself (no dampening), as torch does.
template <typename T, class Decay, class FirstStep, class Nesterov>
void update_with_momentum(const Segment<T> &seg, const SgdScalars<T> &k, Decay, FirstStep, Nesterov) {
    T *__restrict param = seg.param;
    const T *__restrict grad = seg.grad;
    T *__restrict buffer = seg.state[0];
    for (std::size_t i = 0; i < seg.count; ++i) {
        T g = k.sign * grad[i];
        if constexpr (Decay::value) g += k.weight_decay * param[i];
        T b;
        if constexpr (FirstStep::value)
            b = g;
        else
            b = buffer[i] * k.momentum + k.one_minus_dampening * g;
        buffer[i] = b;
        T direction;
        if constexpr (Nesterov::value)
            direction = g + k.momentum * b;
        else
            direction = b;
        param[i] -= k.lr * direction;
    }
}

class Sgd final : public Optimizer {
  public:
    explicit Sgd(const OptimizerOptions &options) : Optimizer(options) {}

    int state_slots() const override { return options_.momentum != 0.0 ? 1 : 0; }
    void apply(const Segment<float> &seg, int64_t step, const double *) const override { update(seg, step); }
    void apply(const Segment<double> &seg, int64_t step, const double *) const override { update(seg, step); }

  private:
    template <typename T> void update(const Segment<T> &seg, int64_t step) const {
        check_segment(seg, state_slots(), step);
        const OptimizerOptions &o = options_;
        const SgdScalars<T> k{T(gradient_sign(o)), T(o.lr), T(o.weight_decay), T(o.momentum),
                              T(1.0 - o.dampening)};
        const bool decay = o.weight_decay != 0.0;
        if (o.momentum == 0.0) {
            with_flags([&](auto d) { update_without_momentum(seg, k, d); }, decay);
            return;
        }
        with_flags([&](auto d, auto first, auto nesterov) { update_with_momentum(seg, k, d, first, nesterov); },
                   decay, step == 1, o.nesterov);
    }
};

} // namespace

std::unique_ptr<Optimizer> make_sgd(const OptimizerOptions &options) { return std::make_unique<Sgd>(options); }

} // namespace shardopt

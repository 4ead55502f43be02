// Adam and AdamW (torch.optim.Adam / AdamW), with AMSGrad. State: slot 0 the first moment m,
// slot 1 the second moment v, slot 2 (AMSGrad only) the running maximum of v.
#include <algorithm>
#include <cmath>
#include <cstddef>

#include "cpu_dispatch.hpp"
#include "kernel_support.hpp"
#include "rules.hpp"

namespace shardopt {
namespace {

using optim_kernels::check_segment;
using optim_kernels::gradient_sign;
using optim_kernels::with_flags;

// Hyper-parameters in the element type: computed in double once per step, then rounded.
template <typename T> struct AdamScalars {
    T sign, weight_decay, decay_factor, one_minus_beta1, beta2, one_minus_beta2;
    T step_size, bias_correction2_sqrt, eps;
};

// One element of the update: every operation rounded on its own (no FMA), in this order, so
// any cut of the range gives the same bits. L2 adds weight_decay * p to the gradient (Adam);
// Decoupled shrinks p first (AdamW).
template <typename T, class L2, class Decoupled, class AmsGrad>
[[gnu::always_inline]] inline void update_element(T *__restrict param, const T *__restrict grad, T *__restrict m,
                                                  T *__restrict v, T *__restrict v_max, std::size_t i,
                                                  const AdamScalars<T> &k) {
    T p = param[i];
    if constexpr (Decoupled::value) p *= k.decay_factor;
    T g = k.sign * grad[i];
    if constexpr (L2::value) g += k.weight_decay * p;
    T m_i = m[i] + k.one_minus_beta1 * (g - m[i]); // torch's lerp(m, g, 1 - beta1)
    T v_i = v[i] * k.beta2 + k.one_minus_beta2 * g * g;
    m[i] = m_i;
    v[i] = v_i;
    if constexpr (AmsGrad::value) {
        v_i = std::max(v_max[i], v_i);
        v_max[i] = v_i;
    }
    T denom = std::sqrt(v_i) / k.bias_correction2_sqrt + k.eps;
    param[i] = p - k.step_size * m_i / denom;
}

// Software prefetch this far ahead of the element being updated, in every array the update
// reads. The arrays are far larger than the caches; the hardware prefetcher follows each
// stream only within a 4 KiB page and restarts at every page boundary (every 1024 floats, in
// four or five streams at once), which leaves the core waiting on memory between bursts of the
// sqrt and the two divisions. Measured on the 2-core Zen (docs/benchmarks.md).
constexpr std::size_t kPrefetchBytes = 1024;

// One pass over p, g, m, v (and v_max): every element is read and written once, no temporaries.
// The range goes a cache line of parameters at a time, each line's elements in one vectorized
// block, the lines kPrefetchBytes ahead requested first.
template <typename T, class L2, class Decoupled, class AmsGrad>
[[gnu::always_inline]] inline void update_loop(const Segment<T> &seg, const AdamScalars<T> k) {
    T *__restrict param = seg.param;
    const T *__restrict grad = seg.grad;
    T *__restrict m = seg.state[0];
    T *__restrict v = seg.state[1];
    T *__restrict v_max = seg.state[2];
    constexpr std::size_t kBlock = 64 / sizeof(T);
    constexpr std::size_t ahead = kPrefetchBytes / sizeof(T);
    const std::size_t n = seg.count;
    std::size_t i = 0;
    if (n > ahead + kBlock)
        for (; i + ahead + kBlock <= n; i += kBlock) { // prefetches stay inside the arrays
            __builtin_prefetch(param + i + ahead);
            __builtin_prefetch(grad + i + ahead);
            __builtin_prefetch(m + i + ahead);
            __builtin_prefetch(v + i + ahead);
            if constexpr (AmsGrad::value) __builtin_prefetch(v_max + i + ahead);
#pragma GCC ivdep
            for (std::size_t j = 0; j < kBlock; ++j)
                update_element<T, L2, Decoupled, AmsGrad>(param, grad, m, v, v_max, i + j, k);
        }
    for (; i < n; ++i) update_element<T, L2, Decoupled, AmsGrad>(param, grad, m, v, v_max, i, k);
}

// The same loop compiled twice: for any x86-64 (SSE2) and for AVX2 (twice the lanes; the
// sqrt/div throughput matters once the loop is close to memory speed). Without FMA (AVX2 does
// not imply it, and the rules are built with -ffp-contract=off) both do the same IEEE-rounded
// operations per element, so they give bitwise the same results (cpu_dispatch.hpp chooses).
template <typename T, class L2, class Decoupled, class AmsGrad>
void update_generic(const Segment<T> &seg, const AdamScalars<T> &k) {
    update_loop<T, L2, Decoupled, AmsGrad>(seg, k);
}
#if defined(__x86_64__) && defined(__GNUC__)
template <typename T, class L2, class Decoupled, class AmsGrad>
__attribute__((target("avx2"))) void update_avx2(const Segment<T> &seg, const AdamScalars<T> &k) {
    update_loop<T, L2, Decoupled, AmsGrad>(seg, k);
}
#endif

template <typename T, class L2, class Decoupled, class AmsGrad>
void update(const Segment<T> &seg, const AdamScalars<T> &k, L2, Decoupled, AmsGrad) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (optim_kernels::use_avx2()) return update_avx2<T, L2, Decoupled, AmsGrad>(seg, k);
#endif
    update_generic<T, L2, Decoupled, AmsGrad>(seg, k);
}

class Adam final : public Optimizer {
  public:
    explicit Adam(const OptimizerOptions &options) : Optimizer(options) {}

    int state_slots() const override { return options_.amsgrad ? 3 : 2; }
    void apply(const Segment<float> &seg, int64_t step, const double *) const override { run(seg, step); }
    void apply(const Segment<double> &seg, int64_t step, const double *) const override { run(seg, step); }

  private:
    template <typename T> void run(const Segment<T> &seg, int64_t step) const {
        check_segment(seg, state_slots(), step);
        const OptimizerOptions &o = options_;
        const double t = double(step);
        const double bias_correction1 = 1.0 - std::pow(o.beta1, t);
        const double bias_correction2 = 1.0 - std::pow(o.beta2, t);
        const AdamScalars<T> k{T(gradient_sign(o)),
                               T(o.weight_decay),
                               T(1.0 - o.lr * o.weight_decay),
                               T(1.0 - o.beta1),
                               T(o.beta2),
                               T(1.0 - o.beta2),
                               T(o.lr / bias_correction1),
                               T(std::sqrt(bias_correction2)),
                               T(o.eps)};
        const bool decoupled = o.kind == OptimizerKind::adamw;
        const bool decay = o.weight_decay != 0.0;
        with_flags([&](auto l2, auto dec, auto ams) { update(seg, k, l2, dec, ams); }, decay && !decoupled,
                   decay && decoupled, o.amsgrad);
    }
};

} // namespace

std::unique_ptr<Optimizer> make_adam(const OptimizerOptions &options) { return std::make_unique<Adam>(options); }

} // namespace shardopt

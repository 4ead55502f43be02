// Lion over every tensor in one launch; the element arithmetic is src/optim/lion.cpp's, operation
// for operation: c = beta1 m + (1 - beta1) g; p = p (1 - lr wd) - lr sign(c); m = beta2 m +
// (1 - beta2) g. State: slot 0 the momentum m. Reads p, g, m and writes p, m: 20 bytes per f32
// parameter.
#include "cuda/cuda_check.hpp"
#include "dtype_dispatch.cuh"
#include "launch.hpp"
#include "rule_frame.cuh"

namespace shardopt::cuda::detail {
namespace {

template <class P>
__global__ void __launch_bounds__(kBlockThreads)
    lion_kernel(const TensorEntry *tensors, const Chunk *chunks, const StepScalars *scalars, uint32_t flags) {
    const bool decay = flags & kWeightDecay;
    const StateSlots slots{0b1u};
    rule_frame<P, 1>(tensors, chunks, scalars, slots, [=](float &p, float g, float (&state)[1], const StepScalars &s) {
        float &m = state[0];
        const float gk = s.sign * (g * s.grad_scale);
        const float c = m * s.beta1 + s.one_minus_beta1 * gk;
        float pk = p;
        if (decay) pk *= s.decay_factor;
        const float sign = c > 0.0f ? 1.0f : c < 0.0f ? -1.0f : c * 0.0f; // torch.sign (NaN stays NaN)
        p = pk - s.lr * sign;
        m = m * s.beta2 + s.one_minus_beta2 * gk;
    });
}

} // namespace

SHARDOPT_RULE_ENTRY_POINTS(lion, lion_kernel)

} // namespace shardopt::cuda::detail

// Adamax over every tensor in one launch; the element arithmetic is src/optim/adamax.cpp's,
// operation for operation: m = lerp(m, g, 1 - beta1); u = max(beta2 u, |g| + eps);
// p -= lr / (1 - beta1^t) * m / u. State: slot 0 m, slot 1 u. Reads p, g, m, u and writes p, m, u:
// 28 bytes per f32 parameter.
#include "cuda/cuda_check.hpp"
#include "dtype_dispatch.cuh"
#include "launch.hpp"
#include "rule_frame.cuh"

namespace shardopt::cuda::detail {
namespace {

template <class P>
__global__ void __launch_bounds__(kBlockThreads)
    adamax_kernel(const TensorEntry *tensors, const Chunk *chunks, const StepScalars *scalars, uint32_t flags) {
    const bool decay = flags & kWeightDecay;
    const StateSlots slots{0b11u};
    rule_frame<P, 2>(tensors, chunks, scalars, slots, [=](float &p, float g, float (&state)[2], const StepScalars &s) {
        float &m = state[0], &u = state[1];
        float gk = s.sign * (g * s.grad_scale);
        if (decay) gk += s.weight_decay * p;
        m = m + s.one_minus_beta1 * (gk - m);
        const float decayed = u * s.beta2, bound = fabsf(gk) + s.eps;
        u = decayed < bound ? bound : decayed; // as the CPU rule (torch.maximum, NaN aside)
        p = p - s.step_size * m / u;
    });
}

} // namespace

SHARDOPT_RULE_ENTRY_POINTS(adamax, adamax_kernel)

} // namespace shardopt::cuda::detail

// Adam and AdamW (with AMSGrad) over every tensor in one launch; the element arithmetic is
// src/optim/adam.cpp's, operation for operation. State: slot 0 m, slot 1 v, slot 2 (AMSGrad)
// the running maximum of v. Reads p, g, m, v and writes p, m, v: 28 bytes per f32 parameter
// (bf16/f16: g 2 + master 4 + m 4 + v 4 read, master, m, v and the 2-byte parameter written).
#include "cuda/cuda_check.hpp"
#include "dtype_dispatch.cuh"
#include "launch.hpp"
#include "rule_frame.cuh"

namespace shardopt::cuda::detail {
namespace {

template <class P>
__global__ void __launch_bounds__(kBlockThreads)
    adam_kernel(const TensorEntry *tensors, const Chunk *chunks, const StepScalars *scalars, uint32_t flags) {
    const bool decay = flags & kWeightDecay;
    const bool l2 = decay && !(flags & kDecoupled), decoupled = decay && (flags & kDecoupled);
    const bool amsgrad = flags & kAmsgrad;
    const StateSlots slots{amsgrad ? 0b111u : 0b011u};
    rule_frame<P, 3>(tensors, chunks, scalars, slots, [=](float &p, float g, float (&state)[3], const StepScalars &s) {
        float &m = state[0], &v = state[1], &v_max = state[2];
        float pk = p;
        if (decoupled) pk *= s.decay_factor;
        float gk = s.sign * (g * s.grad_scale);
        if (l2) gk += s.weight_decay * pk;
        m = m + s.one_minus_beta1 * (gk - m); // torch's lerp(m, g, 1 - beta1)
        v = v * s.beta2 + s.one_minus_beta2 * gk * gk;
        float vk = v;
        if (amsgrad) {
            vk = v_max < vk ? vk : v_max; // std::max(v_max, v)
            v_max = vk;
        }
        const float denom = sqrtf(vk) / s.bias_correction2_sqrt + s.eps;
        p = pk - s.step_size * m / denom;
    });
}

} // namespace

SHARDOPT_RULE_ENTRY_POINTS(adam, adam_kernel)

} // namespace shardopt::cuda::detail

// Adam and AdamW (with AMSGrad) over every tensor in one launch; the element arithmetic is
// src/optim/adam.cpp's, operation for operation. State: slot 0 m, slot 1 v, slot 2 (AMSGrad)
// the running maximum of v. Reads p, g, m, v and writes p, m, v: 28 bytes per f32 parameter
// (bf16/f16: g 2 + master 4 + m 4 + v 4 read, master, m, v and the 2-byte parameter written).
#include "cuda/cuda_check.hpp"
#include "dtype_dispatch.cuh"
#include "launch.hpp"
#include "multi_tensor.cuh"

namespace shardopt::cuda::detail {
namespace {

template <class P>
__global__ void __launch_bounds__(kBlockThreads)
    adam_kernel(const TensorEntry *tensors, const Chunk *chunks, const StepScalars *scalars, uint32_t flags) {
    const StepScalars s = *scalars;
    if (s.skip) return;
    constexpr bool kMixed = sizeof(P) != sizeof(float);
    const bool decay = flags & kWeightDecay;
    const bool l2 = decay && !(flags & kDecoupled), decoupled = decay && (flags & kDecoupled);
    const bool amsgrad = flags & kAmsgrad;

    const ChunkRef ref = this_chunk(tensors, chunks);
    const int64_t offset = ref.chunk.offset;
    const int n = ref.chunk.count;
    const P *grad = static_cast<const P *>(ref.tensor.grad) + offset;
    P *param = static_cast<P *>(ref.tensor.param) + offset;
    float *master = ref.tensor.master + offset;
    float *m = ref.tensor.state[0] + offset;
    float *v = ref.tensor.state[1] + offset;
    float *v_max = amsgrad ? ref.tensor.state[2] + offset : nullptr;

    const int head = vector_head(n, grad, kMixed ? param : nullptr, master, m, v, v_max);
    for_chunk<kVectorWidth<P>>(n, head, [&](auto lanes, int i) {
        constexpr int L = decltype(lanes)::value;
        float g[L], p[L], m_i[L], v_i[L], v_top[L] = {};
        load<L>(grad + i, g);
        load<L>(master + i, p);
        load<L>(m + i, m_i);
        load<L>(v + i, v_i);
        if (amsgrad) load<L>(v_max + i, v_top);
#pragma unroll
        for (int k = 0; k < L; ++k) {
            float pk = p[k];
            if (decoupled) pk *= s.decay_factor;
            float gk = s.sign * (g[k] * s.grad_scale);
            if (l2) gk += s.weight_decay * pk;
            m_i[k] = m_i[k] + s.one_minus_beta1 * (gk - m_i[k]); // torch's lerp(m, g, 1 - beta1)
            v_i[k] = v_i[k] * s.beta2 + s.one_minus_beta2 * gk * gk;
            float vk = v_i[k];
            if (amsgrad) {
                vk = v_top[k] < vk ? vk : v_top[k]; // std::max(v_max, v)
                v_top[k] = vk;
            }
            const float denom = sqrtf(vk) / s.bias_correction2_sqrt + s.eps;
            p[k] = pk - s.step_size * m_i[k] / denom;
        }
        store<L>(m + i, m_i);
        store<L>(v + i, v_i);
        if (amsgrad) store<L>(v_max + i, v_top);
        store<L>(master + i, p);
        if constexpr (kMixed) store<L>(param + i, p);
    });
}

} // namespace

SHARDOPT_RULE_ENTRY_POINTS(adam, adam_kernel)

} // namespace shardopt::cuda::detail

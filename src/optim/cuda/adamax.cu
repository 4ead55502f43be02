// Adamax over every tensor in one launch; the element arithmetic is src/optim/adamax.cpp's,
// operation for operation: m = lerp(m, g, 1 - beta1); u = max(beta2 u, |g| + eps);
// p -= lr / (1 - beta1^t) * m / u. State: slot 0 m, slot 1 u. Reads p, g, m, u and writes p, m, u:
// 28 bytes per f32 parameter.
#include "cuda/cuda_check.hpp"
#include "dtype_dispatch.cuh"
#include "launch.hpp"
#include "multi_tensor.cuh"

namespace shardopt::cuda::detail {
namespace {

template <class P>
__global__ void __launch_bounds__(kBlockThreads)
    adamax_kernel(const TensorEntry *tensors, const Chunk *chunks, const StepScalars *scalars, uint32_t flags) {
    const StepScalars s = *scalars;
    if (s.skip) return;
    constexpr bool kMixed = sizeof(P) != sizeof(float);
    const bool decay = flags & kWeightDecay;

    const ChunkRef ref = this_chunk(tensors, chunks);
    const int64_t offset = ref.chunk.offset;
    const int n = ref.chunk.count;
    const P *grad = static_cast<const P *>(ref.tensor.grad) + offset;
    P *param = static_cast<P *>(ref.tensor.param) + offset;
    float *master = ref.tensor.master + offset;
    float *m = ref.tensor.state[0] + offset;
    float *u = ref.tensor.state[1] + offset;

    const int head = vector_head(n, grad, kMixed ? param : nullptr, master, m, u);
    for_chunk<kVectorWidth<P>>(n, head, [&](auto lanes, int i) {
        constexpr int L = decltype(lanes)::value;
        float g[L], p[L], m_i[L], u_i[L];
        load<L>(grad + i, g);
        load<L>(master + i, p);
        load<L>(m + i, m_i);
        load<L>(u + i, u_i);
#pragma unroll
        for (int k = 0; k < L; ++k) {
            float gk = s.sign * (g[k] * s.grad_scale);
            if (decay) gk += s.weight_decay * p[k];
            m_i[k] = m_i[k] + s.one_minus_beta1 * (gk - m_i[k]);
            const float decayed = u_i[k] * s.beta2, bound = fabsf(gk) + s.eps;
            u_i[k] = decayed < bound ? bound : decayed; // as the CPU rule (torch.maximum, NaN aside)
            p[k] = p[k] - s.step_size * m_i[k] / u_i[k];
        }
        store<L>(m + i, m_i);
        store<L>(u + i, u_i);
        store<L>(master + i, p);
        if constexpr (kMixed) store<L>(param + i, p);
    });
}

} // namespace

SHARDOPT_RULE_ENTRY_POINTS(adamax, adamax_kernel)

} // namespace shardopt::cuda::detail

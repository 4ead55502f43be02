// Lion over every tensor in one launch; the element arithmetic is src/optim/lion.cpp's, operation
// for operation: c = beta1 m + (1 - beta1) g; p = p (1 - lr wd) - lr sign(c); m = beta2 m +
// (1 - beta2) g. State: slot 0 the momentum m. Reads p, g, m and writes p, m: 20 bytes per f32
// parameter.
#include "cuda/cuda_check.hpp"
#include "dtype_dispatch.cuh"
#include "launch.hpp"
#include "multi_tensor.cuh"

namespace shardopt::cuda::detail {
namespace {

template <class P>
__global__ void __launch_bounds__(kBlockThreads)
    lion_kernel(const TensorEntry *tensors, const Chunk *chunks, const StepScalars *scalars, uint32_t flags) {
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

    const int head = vector_head(n, grad, kMixed ? param : nullptr, master, m);
    for_chunk<kVectorWidth<P>>(n, head, [&](auto lanes, int i) {
        constexpr int L = decltype(lanes)::value;
        float g[L], p[L], m_i[L];
        load<L>(grad + i, g);
        load<L>(master + i, p);
        load<L>(m + i, m_i);
#pragma unroll
        for (int k = 0; k < L; ++k) {
            const float gk = s.sign * (g[k] * s.grad_scale);
            const float c = m_i[k] * s.beta1 + s.one_minus_beta1 * gk;
            float pk = p[k];
            if (decay) pk *= s.decay_factor;
            const float sign = c > 0.0f ? 1.0f : c < 0.0f ? -1.0f : c * 0.0f; // torch.sign (NaN stays NaN)
            p[k] = pk - s.lr * sign;
            m_i[k] = m_i[k] * s.beta2 + s.one_minus_beta2 * gk;
        }
        store<L>(m + i, m_i);
        store<L>(master + i, p);
        if constexpr (kMixed) store<L>(param + i, p);
    });
}

} // namespace

SHARDOPT_RULE_ENTRY_POINTS(lion, lion_kernel)

} // namespace shardopt::cuda::detail

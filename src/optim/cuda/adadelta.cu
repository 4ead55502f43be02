// Adadelta over every tensor in one launch; the element arithmetic is src/optim/adadelta.cpp's,
// operation for operation: s = rho s + (1 - rho) g^2; d = sqrt(a + eps) / sqrt(s + eps) * g;
// a = rho a + (1 - rho) d^2; p -= lr d. State: slot 0 s, slot 1 a. Reads p, g, s, a and writes
// p, s, a: 28 bytes per f32 parameter.
#include "cuda/cuda_check.hpp"
#include "dtype_dispatch.cuh"
#include "launch.hpp"
#include "multi_tensor.cuh"

namespace shardopt::cuda::detail {
namespace {

template <class P>
__global__ void __launch_bounds__(kBlockThreads)
    adadelta_kernel(const TensorEntry *tensors, const Chunk *chunks, const StepScalars *scalars, uint32_t flags) {
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
    float *square_avg = ref.tensor.state[0] + offset;
    float *acc_delta = ref.tensor.state[1] + offset;

    const int head = vector_head(n, grad, kMixed ? param : nullptr, master, square_avg, acc_delta);
    for_chunk<kVectorWidth<P>>(n, head, [&](auto lanes, int i) {
        constexpr int L = decltype(lanes)::value;
        float g[L], p[L], sq[L], acc[L];
        load<L>(grad + i, g);
        load<L>(master + i, p);
        load<L>(square_avg + i, sq);
        load<L>(acc_delta + i, acc);
#pragma unroll
        for (int k = 0; k < L; ++k) {
            float gk = s.sign * (g[k] * s.grad_scale);
            if (decay) gk += s.weight_decay * p[k];
            sq[k] = sq[k] * s.rho + s.one_minus_rho * gk * gk;
            const float delta = sqrtf(acc[k] + s.eps) / sqrtf(sq[k] + s.eps) * gk;
            acc[k] = acc[k] * s.rho + s.one_minus_rho * delta * delta;
            p[k] = p[k] - s.lr * delta;
        }
        store<L>(square_avg + i, sq);
        store<L>(acc_delta + i, acc);
        store<L>(master + i, p);
        if constexpr (kMixed) store<L>(param + i, p);
    });
}

} // namespace

SHARDOPT_RULE_ENTRY_POINTS(adadelta, adadelta_kernel)

} // namespace shardopt::cuda::detail

// RMSprop (centered, momentum, L2 weight decay) over every tensor in one launch; the element
// arithmetic is src/optim/rmsprop.cpp's, operation for operation. State: slot 0 the average of
// g^2, then the momentum buffer (momentum > 0), then the average of g (centered).
#include "cuda/cuda_check.hpp"
#include "dtype_dispatch.cuh"
#include "launch.hpp"
#include "multi_tensor.cuh"

namespace shardopt::cuda::detail {
namespace {

template <class P>
__global__ void __launch_bounds__(kBlockThreads)
    rmsprop_kernel(const TensorEntry *tensors, const Chunk *chunks, const StepScalars *scalars, uint32_t flags) {
    const StepScalars s = *scalars;
    if (s.skip) return;
    constexpr bool kMixed = sizeof(P) != sizeof(float);
    const bool decay = flags & kWeightDecay, momentum = flags & kMomentum, centered = flags & kCentered;

    const ChunkRef ref = this_chunk(tensors, chunks);
    const int64_t offset = ref.chunk.offset;
    const int n = ref.chunk.count;
    const P *grad = static_cast<const P *>(ref.tensor.grad) + offset;
    P *param = static_cast<P *>(ref.tensor.param) + offset;
    float *master = ref.tensor.master + offset;
    float *square_avg = ref.tensor.state[0] + offset;
    float *buffer = momentum ? ref.tensor.state[1] + offset : nullptr;
    float *grad_avg = centered ? ref.tensor.state[momentum ? 2 : 1] + offset : nullptr;

    const int head = vector_head(n, grad, kMixed ? param : nullptr, master, square_avg, buffer, grad_avg);
    for_chunk<kVectorWidth<P>>(n, head, [&](auto lanes, int i) {
        constexpr int L = decltype(lanes)::value;
        float g[L], p[L], sq[L], b[L] = {}, ga[L] = {};
        load<L>(grad + i, g);
        load<L>(master + i, p);
        load<L>(square_avg + i, sq);
        if (momentum) load<L>(buffer + i, b);
        if (centered) load<L>(grad_avg + i, ga);
#pragma unroll
        for (int k = 0; k < L; ++k) {
            float gk = s.sign * (g[k] * s.grad_scale);
            if (decay) gk += s.weight_decay * p[k];
            sq[k] = sq[k] * s.alpha + s.one_minus_alpha * gk * gk;
            float avg;
            if (centered) {
                ga[k] = ga[k] + s.one_minus_alpha * (gk - ga[k]); // torch's lerp(ga, g, 1 - alpha)
                avg = sqrtf(sq[k] - ga[k] * ga[k]) + s.eps;
            } else {
                avg = sqrtf(sq[k]) + s.eps;
            }
            if (momentum) {
                b[k] = b[k] * s.momentum + gk / avg;
                p[k] -= s.lr * b[k];
            } else {
                p[k] -= s.lr * gk / avg;
            }
        }
        store<L>(square_avg + i, sq);
        if (momentum) store<L>(buffer + i, b);
        if (centered) store<L>(grad_avg + i, ga);
        store<L>(master + i, p);
        if constexpr (kMixed) store<L>(param + i, p);
    });
}

} // namespace

SHARDOPT_RULE_ENTRY_POINTS(rmsprop, rmsprop_kernel)

} // namespace shardopt::cuda::detail

// SGD with momentum, dampening, Nesterov and L2 weight decay over every tensor in one launch;
// the element arithmetic is src/optim/sgd.cpp's, operation for operation. State: slot 0 the
// momentum buffer (momentum > 0 only).
#include "cuda/cuda_check.hpp"
#include "dtype_dispatch.cuh"
#include "launch.hpp"
#include "multi_tensor.cuh"

namespace shardopt::cuda::detail {
namespace {

template <class P>
__global__ void __launch_bounds__(kBlockThreads)
    sgd_kernel(const TensorEntry *tensors, const Chunk *chunks, const StepScalars *scalars, uint32_t flags) {
    const StepScalars s = *scalars;
    if (s.skip) return;
    constexpr bool kMixed = sizeof(P) != sizeof(float);
    const bool decay = flags & kWeightDecay, momentum = flags & kMomentum, nesterov = flags & kNesterov;
    const bool first = s.first_step != 0; // torch starts the buffer at the gradient itself

    const ChunkRef ref = this_chunk(tensors, chunks);
    const int64_t offset = ref.chunk.offset;
    const int n = ref.chunk.count;
    const P *grad = static_cast<const P *>(ref.tensor.grad) + offset;
    P *param = static_cast<P *>(ref.tensor.param) + offset;
    float *master = ref.tensor.master + offset;
    float *buffer = momentum ? ref.tensor.state[0] + offset : nullptr;

    const int head = vector_head(n, grad, kMixed ? param : nullptr, master, buffer);
    for_chunk<kVectorWidth<P>>(n, head, [&](auto lanes, int i) {
        constexpr int L = decltype(lanes)::value;
        float g[L], p[L], b[L] = {};
        load<L>(grad + i, g);
        load<L>(master + i, p);
        if (momentum && !first) load<L>(buffer + i, b);
#pragma unroll
        for (int k = 0; k < L; ++k) {
            float gk = s.sign * (g[k] * s.grad_scale);
            if (decay) gk += s.weight_decay * p[k];
            if (momentum) {
                b[k] = first ? gk : b[k] * s.momentum + s.one_minus_dampening * gk;
                const float direction = nesterov ? gk + s.momentum * b[k] : b[k];
                p[k] -= s.lr * direction;
            } else {
                p[k] -= s.lr * gk;
            }
        }
        if (momentum) store<L>(buffer + i, b);
        store<L>(master + i, p);
        if constexpr (kMixed) store<L>(param + i, p);
    });
}

} // namespace

SHARDOPT_RULE_ENTRY_POINTS(sgd, sgd_kernel)

} // namespace shardopt::cuda::detail

// Adagrad (lr_decay, initial accumulator, L2 weight decay) over every tensor in one launch;
// the element arithmetic is src/optim/adagrad.cpp's, operation for operation. State: slot 0
// the running sum of g^2 (initialized to initial_accumulator_value at creation).
#include "cuda/cuda_check.hpp"
#include "dtype_dispatch.cuh"
#include "launch.hpp"
#include "multi_tensor.cuh"

namespace shardopt::cuda::detail {
namespace {

template <class P>
__global__ void __launch_bounds__(kBlockThreads)
    adagrad_kernel(const TensorEntry *tensors, const Chunk *chunks, const StepScalars *scalars, uint32_t flags) {
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
    float *sum = ref.tensor.state[0] + offset;

    const int head = vector_head(n, grad, kMixed ? param : nullptr, master, sum);
    for_chunk<kVectorWidth<P>>(n, head, [&](auto lanes, int i) {
        constexpr int L = decltype(lanes)::value;
        float g[L], p[L], acc[L];
        load<L>(grad + i, g);
        load<L>(master + i, p);
        load<L>(sum + i, acc);
#pragma unroll
        for (int k = 0; k < L; ++k) {
            float gk = s.sign * (g[k] * s.grad_scale);
            if (decay) gk += s.weight_decay * p[k];
            acc[k] = acc[k] + gk * gk;
            p[k] -= s.lr * gk / (sqrtf(acc[k]) + s.eps); // s.lr: lr / (1 + (step - 1) * lr_decay)
        }
        store<L>(sum + i, acc);
        store<L>(master + i, p);
        if constexpr (kMixed) store<L>(param + i, p);
    });
}

} // namespace

SHARDOPT_RULE_ENTRY_POINTS(adagrad, adagrad_kernel)

} // namespace shardopt::cuda::detail

// LAMB over every tensor, the two phases of src/optim/lamb.cpp in three launches:
//   1. moments: advance m and v, and per chunk sum |p|^2 and |r|^2 (r the bias-corrected Adam
//      direction plus decoupled weight decay), in double as the CPU does;
//   2. trust: one warp per tensor sums its chunks' partials and stores lr * trust ratio
//      (|p| / |r|, 1 when either is 0), formed in double and rounded once as on the CPU;
//   3. apply: recompute r from the advanced state (the same code, so the same values) and
//      move p by the tensor's lr.
// State: slot 0 m, slot 1 v.
#include "block_reduce.cuh"
#include "cuda/cuda_check.hpp"
#include "dtype_dispatch.cuh"
#include "launch.hpp"
#include "multi_tensor.cuh"
#include "kernel_launch.cuh"

namespace shardopt::cuda::detail {
namespace {

constexpr int kTrustThreads = 256; // 8 tensors (warps) per block

__device__ __forceinline__ float direction(float m, float v, float p, const StepScalars &s, bool decay) {
    float r = (m / s.bias_correction1) / (sqrtf(v / s.bias_correction2) + s.eps);
    if (decay) r += s.weight_decay * p;
    return r;
}

template <class P>
__global__ void __launch_bounds__(kBlockThreads) lamb_moments_kernel(const TensorEntry *tensors, const Chunk *chunks,
                                                                     const StepScalars *scalars, uint32_t flags,
                                                                     double *partials) {
    const StepScalars s = *scalars;
    if (s.skip) return;
    const bool decay = flags & kWeightDecay;

    const ChunkRef ref = this_chunk(tensors, chunks);
    const int64_t offset = ref.chunk.offset;
    const int n = ref.chunk.count;
    const P *grad = static_cast<const P *>(ref.tensor.grad) + offset;
    const float *master = ref.tensor.master + offset;
    float *m = ref.tensor.state[0] + offset;
    float *v = ref.tensor.state[1] + offset;

    double param_norm_squared = 0.0, update_norm_squared = 0.0;
    const int head = vector_head(n, grad, master, m, v);
    for_chunk<kVectorWidth<P>>(n, head, [&](auto lanes, int i) {
        constexpr int L = decltype(lanes)::value;
        float g[L], p[L], m_i[L], v_i[L];
        load<L>(grad + i, g);
        load<L>(master + i, p);
        load<L>(m + i, m_i);
        load<L>(v + i, v_i);
#pragma unroll
        for (int k = 0; k < L; ++k) {
            const float gk = s.sign * (g[k] * s.grad_scale);
            m_i[k] = m_i[k] + s.one_minus_beta1 * (gk - m_i[k]);
            v_i[k] = v_i[k] * s.beta2 + s.one_minus_beta2 * gk * gk;
            const double r = direction(m_i[k], v_i[k], p[k], s, decay);
            param_norm_squared += double(p[k]) * double(p[k]);
            update_norm_squared += r * r;
        }
        store<L>(m + i, m_i);
        store<L>(v + i, v_i);
    });
    param_norm_squared = block_sum<kBlockThreads>(param_norm_squared);
    update_norm_squared = block_sum<kBlockThreads>(update_norm_squared);
    if (threadIdx.x == 0) {
        partials[2 * blockIdx.x] = param_norm_squared;
        partials[2 * blockIdx.x + 1] = update_norm_squared;
    }
}

__global__ void __launch_bounds__(kTrustThreads)
    lamb_trust_kernel(const double *partials, const TensorChunks *tensor_chunks, int tensor_count,
                      const StepScalars *scalars, float *tensor_lr) {
    const int tensor = int((blockIdx.x * blockDim.x + threadIdx.x) / 32), lane = int(threadIdx.x % 32);
    if (tensor >= tensor_count) return; // whole warps leave together
    const StepScalars s = *scalars;
    if (s.skip) return;
    const TensorChunks range = tensor_chunks[tensor];
    double param_norm_squared = 0.0, update_norm_squared = 0.0;
    for (int c = lane; c < range.count; c += 32) {
        param_norm_squared += partials[2 * (range.first + c)];
        update_norm_squared += partials[2 * (range.first + c) + 1];
    }
    param_norm_squared = warp_sum(param_norm_squared);
    update_norm_squared = warp_sum(update_norm_squared);
    if (lane == 0) {
        const double param_norm = sqrt(param_norm_squared), update_norm = sqrt(update_norm_squared);
        const double trust = param_norm > 0.0 && update_norm > 0.0 ? param_norm / update_norm : 1.0;
        tensor_lr[tensor] = float(s.lr_double * trust);
    }
}

template <class P>
__global__ void __launch_bounds__(kBlockThreads)
    lamb_apply_kernel(const TensorEntry *tensors, const Chunk *chunks, const StepScalars *scalars, uint32_t flags,
                      const float *tensor_lr) {
    const StepScalars s = *scalars;
    if (s.skip) return;
    constexpr bool kMixed = sizeof(P) != sizeof(float);
    const bool decay = flags & kWeightDecay;

    const ChunkRef ref = this_chunk(tensors, chunks);
    const int64_t offset = ref.chunk.offset;
    const int n = ref.chunk.count;
    const float scaled_lr = tensor_lr[ref.chunk.tensor];
    P *param = static_cast<P *>(ref.tensor.param) + offset;
    float *master = ref.tensor.master + offset;
    const float *m = ref.tensor.state[0] + offset;
    const float *v = ref.tensor.state[1] + offset;

    // Mixed precision: the 2-byte parameters have the wider vector step, so they lead.
    const int head = kMixed ? vector_head(n, param, master, m, v) : vector_head(n, master, m, v);
    for_chunk<kVectorWidth<P>>(n, head, [&](auto lanes, int i) {
        constexpr int L = decltype(lanes)::value;
        float p[L], m_i[L], v_i[L];
        load<L>(master + i, p);
        load<L>(m + i, m_i);
        load<L>(v + i, v_i);
#pragma unroll
        for (int k = 0; k < L; ++k) p[k] -= scaled_lr * direction(m_i[k], v_i[k], p[k], s, decay);
        store<L>(master + i, p);
        if constexpr (kMixed) store<L>(param + i, p);
    });
}

} // namespace

void launch_lamb(const ChunkLaunch &launch, const LambBuffers &lamb) {
    with_param_type(launch.dtype, [&](auto *tag) {
        using P = std::remove_pointer_t<decltype(tag)>;
        SHARDOPT_LAUNCH(lamb_moments_kernel<P>, launch.chunk_count, kBlockThreads, 0, launch.stream)(
            launch.tensors, launch.chunks, launch.scalars, launch.flags, lamb.partials);
        check_launch("lamb_moments_kernel");
        const int warps_per_block = kTrustThreads / 32;
        const int blocks = (lamb.tensor_count + warps_per_block - 1) / warps_per_block;
        SHARDOPT_LAUNCH(lamb_trust_kernel, blocks, kTrustThreads, 0, launch.stream)(lamb.partials, lamb.tensor_chunks,
                                                                      lamb.tensor_count, launch.scalars, lamb.tensor_lr);
        check_launch("lamb_trust_kernel");
        SHARDOPT_LAUNCH(lamb_apply_kernel<P>, launch.chunk_count, kBlockThreads, 0, launch.stream)(
            launch.tensors, launch.chunks, launch.scalars, launch.flags, lamb.tensor_lr);
        check_launch("lamb_apply_kernel");
    });
}

void preload_lamb(DType dtype) {
    with_param_type(dtype, [&](auto *tag) {
        using P = std::remove_pointer_t<decltype(tag)>;
        cudaFuncAttributes attributes{};
        check(cudaFuncGetAttributes(&attributes, lamb_moments_kernel<P>), "loading lamb_moments_kernel");
        check(cudaFuncGetAttributes(&attributes, lamb_trust_kernel), "loading lamb_trust_kernel");
        check(cudaFuncGetAttributes(&attributes, lamb_apply_kernel<P>), "loading lamb_apply_kernel");
    });
}

} // namespace shardopt::cuda::detail

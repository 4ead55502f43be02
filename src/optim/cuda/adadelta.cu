// Adadelta over every tensor in one launch; the element arithmetic is src/optim/adadelta.cpp's,
// operation for operation: s = rho s + (1 - rho) g^2; d = sqrt(a + eps) / sqrt(s + eps) * g;
// a = rho a + (1 - rho) d^2; p -= lr d. State: slot 0 s, slot 1 a. Reads p, g, s, a and writes
// p, s, a: 28 bytes per f32 parameter.
#include "cuda/cuda_check.hpp"
#include "dtype_dispatch.cuh"
#include "launch.hpp"
#include "rule_frame.cuh"

namespace shardopt::cuda::detail {
namespace {

template <class P>
__global__ void __launch_bounds__(kBlockThreads)
    adadelta_kernel(const TensorEntry *tensors, const Chunk *chunks, const StepScalars *scalars, uint32_t flags) {
    const bool decay = flags & kWeightDecay;
    const StateSlots slots{0b11u};
    rule_frame<P, 2>(tensors, chunks, scalars, slots, [=](float &p, float g, float (&state)[2], const StepScalars &s) {
        float &square_avg = state[0], &acc_delta = state[1];
        float gk = s.sign * (g * s.grad_scale);
        if (decay) gk += s.weight_decay * p;
        square_avg = square_avg * s.rho + s.one_minus_rho * gk * gk;
        const float delta = sqrtf(acc_delta + s.eps) / sqrtf(square_avg + s.eps) * gk;
        acc_delta = acc_delta * s.rho + s.one_minus_rho * delta * delta;
        p = p - s.lr * delta;
    });
}

} // namespace

SHARDOPT_RULE_ENTRY_POINTS(adadelta, adadelta_kernel)

} // namespace shardopt::cuda::detail

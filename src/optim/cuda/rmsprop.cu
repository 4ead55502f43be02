// RMSprop (centered, momentum, L2 weight decay) over every tensor in one launch; the element
// arithmetic is src/optim/rmsprop.cpp's, operation for operation. State: slot 0 the average of
// g^2, then the momentum buffer (momentum > 0), then the average of g (centered).
#include "cuda/cuda_check.hpp"
#include "dtype_dispatch.cuh"
#include "launch.hpp"
#include "rule_frame.cuh"

namespace shardopt::cuda::detail {
namespace {

template <class P>
__global__ void __launch_bounds__(kBlockThreads)
    rmsprop_kernel(const TensorEntry *tensors, const Chunk *chunks, const StepScalars *scalars, uint32_t flags) {
    const bool decay = flags & kWeightDecay, momentum = flags & kMomentum, centered = flags & kCentered;
    const StateSlots slots{0b001u | (momentum ? 0b010u : 0u) | (centered ? 0b100u : 0u)};
    rule_frame<P, 3>(tensors, chunks, scalars, slots, [=](float &p, float g, float (&state)[3], const StepScalars &s) {
        float &square_avg = state[0], &buffer = state[1], &grad_avg = state[2];
        float gk = s.sign * (g * s.grad_scale);
        if (decay) gk += s.weight_decay * p;
        square_avg = square_avg * s.alpha + s.one_minus_alpha * gk * gk;
        float avg;
        if (centered) {
            grad_avg = grad_avg + s.one_minus_alpha * (gk - grad_avg); // torch's lerp(ga, g, 1 - alpha)
            avg = sqrtf(square_avg - grad_avg * grad_avg) + s.eps;
        } else {
            avg = sqrtf(square_avg) + s.eps;
        }
        if (momentum) {
            buffer = buffer * s.momentum + gk / avg;
            p -= s.lr * buffer;
        } else {
            p -= s.lr * gk / avg;
        }
    });
}

} // namespace

SHARDOPT_RULE_ENTRY_POINTS(rmsprop, rmsprop_kernel)

} // namespace shardopt::cuda::detail

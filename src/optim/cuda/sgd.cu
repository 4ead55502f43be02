// SGD with momentum, dampening, Nesterov and L2 weight decay over every tensor in one launch;
// the element arithmetic is src/optim/sgd.cpp's, operation for operation. State: slot 0 the
// momentum buffer (momentum > 0 only).
#include "cuda/cuda_check.hpp"
#include "dtype_dispatch.cuh"
#include "launch.hpp"
#include "rule_frame.cuh"

namespace shardopt::cuda::detail {
namespace {

template <class P>
__global__ void __launch_bounds__(kBlockThreads)
    sgd_kernel(const TensorEntry *tensors, const Chunk *chunks, const StepScalars *scalars, uint32_t flags) {
    const bool decay = flags & kWeightDecay, momentum = flags & kMomentum, nesterov = flags & kNesterov;
    // torch starts the buffer at the gradient itself: not read on the first step
    const StateSlots slots{momentum ? 0b1u : 0u, 0b1u};
    rule_frame<P, 1>(tensors, chunks, scalars, slots, [=](float &p, float g, float (&state)[1], const StepScalars &s) {
        float &buffer = state[0];
        const bool first = s.first_step != 0;
        float gk = s.sign * (g * s.grad_scale);
        if (decay) gk += s.weight_decay * p;
        if (momentum) {
            buffer = first ? gk : buffer * s.momentum + s.one_minus_dampening * gk;
            const float direction = nesterov ? gk + s.momentum * buffer : buffer;
            p -= s.lr * direction;
        } else {
            p -= s.lr * gk;
        }
    });
}

} // namespace

SHARDOPT_RULE_ENTRY_POINTS(sgd, sgd_kernel)

} // namespace shardopt::cuda::detail

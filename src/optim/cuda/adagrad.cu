// Adagrad (lr_decay, initial accumulator, L2 weight decay) over every tensor in one launch;
// the element arithmetic is src/optim/adagrad.cpp's, operation for operation. State: slot 0
// the running sum of g^2 (initialized to initial_accumulator_value at creation).
#include "cuda/cuda_check.hpp"
#include "dtype_dispatch.cuh"
#include "launch.hpp"
#include "rule_frame.cuh"

namespace shardopt::cuda::detail {
namespace {

template <class P>
__global__ void __launch_bounds__(kBlockThreads)
    adagrad_kernel(const TensorEntry *tensors, const Chunk *chunks, const StepScalars *scalars, uint32_t flags) {
    const bool decay = flags & kWeightDecay;
    const StateSlots slots{0b1u};
    rule_frame<P, 1>(tensors, chunks, scalars, slots, [=](float &p, float g, float (&state)[1], const StepScalars &s) {
        float &sum = state[0];
        float gk = s.sign * (g * s.grad_scale);
        if (decay) gk += s.weight_decay * p;
        sum = sum + gk * gk;
        p -= s.lr * gk / (sqrtf(sum) + s.eps); // s.lr: lr / (1 + (step - 1) * lr_decay)
    });
}

} // namespace

SHARDOPT_RULE_ENTRY_POINTS(adagrad, adagrad_kernel)

} // namespace shardopt::cuda::detail

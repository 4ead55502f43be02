// Pass 2 of a step, one block: everything the host would otherwise have to read back.
// Reduces the gradient sum of squares, then one thread decides the step as
// ShardedOptimizer::step() does on the CPU (skip when non-finite, clip to max_grad_norm as
// torch.nn.utils.clip_grad_norm_), advances the step counter, computes the rule's scalars for
// that step, and updates the loss scale as torch.cuda.amp.GradScaler.update() does.
#include <cstdint>

#include "block_reduce.cuh"
#include "cuda/cuda_check.hpp"
#include "launch.hpp"
#include "shardopt/optim.hpp"
#include "kernel_launch.cuh"

namespace shardopt::cuda::detail {
namespace {

constexpr int kControlThreads = 1024;

// The CPU rules' scalars (src/optim/*.cpp), the same double expressions rounded once to float.
// The .cu files are compiled without FMA contraction, so `1.0 - lr * wd` rounds as on the CPU.
__device__ void rule_scalars(const StepHyper &h, int64_t step, StepScalars &s) {
    const double t = double(step);
    s.first_step = step == 1 ? 1 : 0;
    s.sign = h.maximize ? -1.0f : 1.0f;
    s.weight_decay = float(h.weight_decay);
    s.eps = float(h.eps);
    switch (OptimizerKind(h.kind)) {
    case OptimizerKind::sgd:
        s.lr = float(h.lr);
        s.momentum = float(h.momentum);
        s.one_minus_dampening = float(1.0 - h.dampening);
        break;
    case OptimizerKind::adam:
    case OptimizerKind::adamw:
        s.decay_factor = float(1.0 - h.lr * h.weight_decay);
        s.one_minus_beta1 = float(1.0 - h.beta1);
        s.beta2 = float(h.beta2);
        s.one_minus_beta2 = float(1.0 - h.beta2);
        s.step_size = float(h.lr / (1.0 - pow(h.beta1, t)));
        s.bias_correction2_sqrt = float(sqrt(1.0 - pow(h.beta2, t)));
        s.inv_bias_correction2_sqrt = float(1.0 / sqrt(1.0 - pow(h.beta2, t)));
        break;
    case OptimizerKind::rmsprop:
        s.lr = float(h.lr);
        s.alpha = float(h.alpha);
        s.one_minus_alpha = float(1.0 - h.alpha);
        s.momentum = float(h.momentum);
        break;
    case OptimizerKind::adagrad: s.lr = float(h.lr / (1.0 + double(step - 1) * h.lr_decay)); break;
    case OptimizerKind::lion:
        s.lr = float(h.lr);
        s.decay_factor = float(1.0 - h.lr * h.weight_decay);
        s.beta1 = float(h.beta1);
        s.one_minus_beta1 = float(1.0 - h.beta1);
        s.beta2 = float(h.beta2);
        s.one_minus_beta2 = float(1.0 - h.beta2);
        break;
    case OptimizerKind::adamax: // adamax.cpp
        s.one_minus_beta1 = float(1.0 - h.beta1);
        s.beta2 = float(h.beta2);
        s.step_size = float(h.lr / (1.0 - pow(h.beta1, t)));
        break;
    case OptimizerKind::adadelta: // adadelta.cpp
        s.lr = float(h.lr);
        s.rho = float(h.rho);
        s.one_minus_rho = float(1.0 - h.rho);
        break;
    case OptimizerKind::lamb:
        s.one_minus_beta1 = float(1.0 - h.beta1);
        s.beta2 = float(h.beta2);
        s.one_minus_beta2 = float(1.0 - h.beta2);
        s.bias_correction1 = float(1.0 - pow(h.beta1, t));
        s.bias_correction2 = float(1.0 - pow(h.beta2, t));
        s.lr_double = h.lr;
        break;
    default: break; // the other rules have no kernels: DeviceOptimizer refuses them
    }
}

__global__ void __launch_bounds__(kControlThreads)
    step_control_kernel(StepControl *control, StepScalars *scalars, const double *partials, int partial_count,
                        StepHyper h) {
    double sum = 0.0;
    for (int i = int(threadIdx.x); i < partial_count; i += kControlThreads) sum += partials[i];
    sum = block_sum<kControlThreads>(sum);
    if (threadIdx.x != 0) return;

    StepControl c = *control;
    const bool scaling = h.dynamic_scaling != 0;
    // GradScaler: inv_scale = float(1 / double(scale)).
    const float inv_scale = scaling ? float(1.0 / double(c.loss_scale)) : 1.0f;
    const bool finite = !h.have_norm || isfinite(sum);
    const double norm = h.have_norm ? sqrt(sum) * double(inv_scale) : 0.0;
    const bool skip = h.skip_nonfinite && !finite;
    double clip = 1.0;
    if (h.max_grad_norm > 0.0) { // std::min(1.0, q) as the CPU path: a NaN norm leaves 1
        const double q = h.max_grad_norm / (norm + 1e-6);
        clip = q < 1.0 ? q : 1.0;
    }

    StepScalars s{};
    s.skip = skip ? 1 : 0;
    s.grad_scale = float(double(inv_scale) * clip);
    if (skip) {
        c.skipped_steps += 1;
    } else {
        c.steps += 1;
        rule_scalars(h, c.steps, s);
    }
    if (scaling) { // torch's _amp_update_scale_
        if (!finite) {
            c.loss_scale = float(double(c.loss_scale) * h.backoff_factor);
            c.growth_tracker = 0;
        } else if (c.growth_tracker + 1 == h.growth_interval) {
            const float grown = float(double(c.loss_scale) * h.growth_factor);
            if (isfinite(grown)) c.loss_scale = grown;
            c.growth_tracker = 0;
        } else {
            c.growth_tracker += 1;
        }
    }
    c.last_skipped = skip ? 1 : 0;
    c.last_grad_norm = norm;
    c.last_grad_scale = s.grad_scale;
    *control = c;
    *scalars = s;
}

} // namespace

void launch_step_control(StepControl *control, StepScalars *scalars, const double *partials, int partial_count,
                         const StepHyper &hyper, cudaStream_t stream) {
    SHARDOPT_LAUNCH(step_control_kernel, 1, kControlThreads, 0, stream)(control, scalars, partials, partial_count, hyper);
    check_launch("step_control_kernel");
}

void preload_step_control() {
    cudaFuncAttributes attributes{};
    check(cudaFuncGetAttributes(&attributes, step_control_kernel), "loading step_control_kernel");
}

} // namespace shardopt::cuda::detail

// What decides a step on the device, so the host never has to look: the persistent control
// block (step counter, loss scale), the hyper-parameters each step() passes by value, and the
// per-step scalars the deciding kernel writes for the update kernels to read. Plain structs,
// shared by host C++ and the .cu files.
#pragma once

#include <cstdint>

namespace shardopt::cuda::detail {

// Lives in device memory for the optimizer's lifetime; only the step-control kernel writes it
// during training (the host reads it back in step_info()).
struct StepControl {
    int64_t steps = 0;         // updates applied
    int64_t skipped_steps = 0; // steps skipped for non-finite gradients
    double last_grad_norm = 0.0;
    float loss_scale = 1.0f;
    float last_grad_scale = 1.0f;
    int32_t growth_tracker = 0;
    int32_t last_skipped = 0;
};

// Passed by value with every step (so set_lr takes effect without touching device memory).
struct StepHyper {
    int32_t kind = 0; // OptimizerKind
    int32_t maximize = 0;
    double lr = 0, weight_decay = 0, momentum = 0, dampening = 0;
    double beta1 = 0, beta2 = 0, eps = 0, alpha = 0, lr_decay = 0, rho = 0;
    // Gradient handling.
    int32_t have_norm = 0;      // the sum-of-squares pass ran: partials hold this step's values
    int32_t skip_nonfinite = 0;
    int32_t dynamic_scaling = 0;
    int32_t growth_interval = 2000;
    double max_grad_norm = 0; // 0 = no clipping
    double growth_factor = 2.0, backoff_factor = 0.5;
};

// This step's decision and the rule's scalars, computed in double and rounded to float exactly
// as the CPU rules compute theirs (src/optim/*.cpp), so both round the same values.
struct StepScalars {
    int32_t skip = 0;       // leave parameters, state and counters untouched
    int32_t first_step = 0; // step == 1: SGD starts its momentum buffer at the gradient
    float grad_scale = 1.0f; // 1 / loss_scale * clip coefficient, applied to every gradient
    float sign = 1.0f;       // -1 when maximizing (multiplying by -1 is exact)
    float lr = 0;            // SGD, RMSprop; Adagrad's decayed lr
    float weight_decay = 0;
    float momentum = 0, one_minus_dampening = 0;  // SGD (momentum also RMSprop)
    float one_minus_beta1 = 0, beta2 = 0, one_minus_beta2 = 0, eps = 0;
    float beta1 = 0;        // Lion
    float decay_factor = 1; // AdamW: 1 - lr * weight_decay
    float step_size = 0;    // Adam: lr / bias_correction1
    float bias_correction2_sqrt = 1;
    float inv_bias_correction2_sqrt = 1;              // low-bit Adam (lowbit_rules.cpp multiplies)
    float bias_correction1 = 1, bias_correction2 = 1; // LAMB
    float alpha = 0, one_minus_alpha = 0;             // RMSprop
    float rho = 0, one_minus_rho = 0;                 // Adadelta
    double lr_double = 0; // LAMB: lr * trust ratio is formed in double
};

} // namespace shardopt::cuda::detail

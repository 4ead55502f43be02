// Every update rule on the GPU against the CPU reference (shardopt::Optimizer over host
// buffers), step by step for 100 steps: f32 within 2 ulp, bf16/f16 mixed precision with fp32
// master weights and state within 2 ulp and the parameters within 1 ulp of their dtype.
// Tensors of odd sizes (1, 3, 1000003) at starts off every alignment, and many tensors in one
// launch.
#include <boost/test/unit_test.hpp>

#include <cstdlib>

#include <random>
#include <string>
#include <vector>

#include "gpu_support.hpp"

using namespace shardopt;
using gpu_test::Layout;
using gpu_test::Lockstep;

namespace {

struct RuleCase {
    std::string name;
    OptimizerOptions options;
};

OptimizerOptions with(OptimizerKind kind, void (*tweak)(OptimizerOptions &) = nullptr) {
    OptimizerOptions o = OptimizerOptions::defaults(kind);
    if (tweak) tweak(o);
    return o;
}

// Every variant each kernel branches on (SHARDOPT_TEST_RULES=name,name,...: only those, for a
// quick run while working on one kernel).
std::vector<RuleCase> all_rule_cases() {
    return {
        {"sgd", with(OptimizerKind::sgd, [](OptimizerOptions &o) { o.lr = 0.05; })},
        {"sgd_momentum_dampening_decay", with(OptimizerKind::sgd, [](OptimizerOptions &o) {
             o.lr = 0.05; o.momentum = 0.9; o.dampening = 0.1; o.weight_decay = 0.01;
         })},
        {"sgd_nesterov_maximize", with(OptimizerKind::sgd, [](OptimizerOptions &o) {
             o.lr = 0.05; o.momentum = 0.9; o.nesterov = true; o.maximize = true;
         })},
        {"adam", with(OptimizerKind::adam)},
        {"adam_l2_amsgrad", with(OptimizerKind::adam, [](OptimizerOptions &o) {
             o.weight_decay = 0.01; o.amsgrad = true;
         })},
        {"adamw_maximize", with(OptimizerKind::adamw, [](OptimizerOptions &o) { o.maximize = true; })},
        {"adamw_amsgrad", with(OptimizerKind::adamw, [](OptimizerOptions &o) { o.amsgrad = true; o.lr = 1e-2; })},
        {"rmsprop", with(OptimizerKind::rmsprop)},
        {"rmsprop_centered_momentum_decay", with(OptimizerKind::rmsprop, [](OptimizerOptions &o) {
             o.centered = true; o.momentum = 0.5; o.weight_decay = 0.01; o.alpha = 0.9;
         })},
        {"rmsprop_centered", with(OptimizerKind::rmsprop, [](OptimizerOptions &o) { o.centered = true; })},
        {"rmsprop_momentum", with(OptimizerKind::rmsprop, [](OptimizerOptions &o) { o.momentum = 0.9; })},
        {"adagrad", with(OptimizerKind::adagrad)},
        {"adagrad_lr_decay_initial_decay", with(OptimizerKind::adagrad, [](OptimizerOptions &o) {
             o.lr_decay = 0.01; o.initial_accumulator_value = 0.1; o.weight_decay = 0.01;
         })},
        {"lamb", with(OptimizerKind::lamb)},
        {"lamb_decay", with(OptimizerKind::lamb, [](OptimizerOptions &o) { o.weight_decay = 0.01; })},
        {"lion", with(OptimizerKind::lion)},
        {"lion_decay_maximize", with(OptimizerKind::lion, [](OptimizerOptions &o) {
             o.weight_decay = 0.1;
             o.maximize = true;
         })},
        {"adamax", with(OptimizerKind::adamax)},
        {"adamax_decay_maximize", with(OptimizerKind::adamax, [](OptimizerOptions &o) {
             o.weight_decay = 0.01;
             o.maximize = true;
         })},
        {"adadelta", with(OptimizerKind::adadelta)},
        {"adadelta_decay", with(OptimizerKind::adadelta, [](OptimizerOptions &o) { o.weight_decay = 0.01; })},
    };
}

std::vector<RuleCase> rule_cases() {
    std::vector<RuleCase> cases = all_rule_cases();
    const char *only = std::getenv("SHARDOPT_TEST_RULES");
    if (!only || !*only) return cases;
    const std::string wanted = std::string(",") + only + ",";
    std::vector<RuleCase> picked;
    for (auto &c : cases)
        if (wanted.find("," + c.name + ",") != std::string::npos) picked.push_back(std::move(c));
    return picked;
}

// Odd sizes back to back: with the shift, starts fall on every offset within 16 bytes; the
// large tensor spans many chunks and ends in a partial one.
Layout odd_sizes(std::size_t param_shift, std::size_t grad_shift) {
    Layout layout;
    layout.sizes = {1, 3, 1000003, 17, 4096, 65537, 5};
    layout.param_shift = param_shift;
    layout.grad_shift = grad_shift;
    return layout;
}

void run_steps(Lockstep &lockstep, const std::string &what, int steps, int64_t master_ulp, int64_t param_ulp) {
    for (int s = 1; s <= steps; ++s) {
        if (s == steps / 2) lockstep.set_lr(lockstep.optimizer().options().optimizer.lr * 0.5); // a schedule
        const gpu_test::StepCheck check = lockstep.step();
        BOOST_TEST_CONTEXT(what << ", step " << s) {
            BOOST_TEST(!check.skipped);
            BOOST_TEST(check.info.steps == s);
            BOOST_TEST(check.info.last_grad_scale == 1.0f);
            BOOST_TEST(check.master_ulp <= master_ulp);
            BOOST_TEST(check.state_ulp <= master_ulp);
            BOOST_TEST(check.param_ulp <= param_ulp);
        }
        if (check.master_ulp > master_ulp || check.state_ulp > master_ulp || check.param_ulp > param_ulp) return;
    }
}

cuda::DeviceOptimizerOptions device_options(const OptimizerOptions &rule, DType dtype) {
    cuda::DeviceOptimizerOptions o;
    o.optimizer = rule;
    o.dtype = dtype;
    o.loss_scaling.mode = cuda::LossScaling::none; // the gradients are the true ones here
    return o;
}

} // namespace

BOOST_AUTO_TEST_SUITE(rules)

// f32: 100 steps per rule, the parameters at the buffer start (starts at every offset) and
// everything shifted by one element (a misaligned first tensor).
BOOST_AUTO_TEST_CASE(f32_matches_cpu_within_2_ulp) {
    for (const RuleCase &c : rule_cases())
        for (std::size_t shift : {std::size_t(0), std::size_t(1)}) {
            Lockstep lockstep(device_options(c.options, DType::f32), odd_sizes(shift, shift), 7);
            run_steps(lockstep, c.name + " f32 shift " + std::to_string(shift), 100, 2, 0);
        }
}

// A gradient buffer out of step with the parameters (shifted by one more element): the
// kernels cannot align both and take the element-by-element path everywhere.
BOOST_AUTO_TEST_CASE(f32_gradients_misaligned_against_parameters) {
    for (const char *name : {"sgd_momentum_dampening_decay", "adam_l2_amsgrad", "rmsprop_centered_momentum_decay",
                             "adagrad_lr_decay_initial_decay", "lamb_decay"})
        for (const RuleCase &c : rule_cases())
            if (c.name == name) {
                Lockstep lockstep(device_options(c.options, DType::f32), odd_sizes(0, 1), 11);
                run_steps(lockstep, c.name + " f32 grads shifted", 20, 2, 0);
            }
}

// bf16 and f16 parameters and gradients, fp32 master weights and state.
BOOST_AUTO_TEST_CASE(mixed_precision_matches_cpu) {
    for (DType dtype : {DType::bf16, DType::f16})
        for (const RuleCase &c : rule_cases()) {
            // Shifted by 3: the 2-byte parameters and the fp32 arrays are both off their vector alignment.
            Lockstep lockstep(device_options(c.options, dtype), odd_sizes(3, 3), 13);
            run_steps(lockstep, c.name + " " + dtype_name(dtype), 100, 2, 1);
        }
}

// 700 tensors of random sizes in one launch (more than one kernel-argument batch of gradient
// pointers), for the element-wise rules and for LAMB's per-tensor trust ratios.
BOOST_AUTO_TEST_CASE(many_tensors_in_one_launch) {
    std::mt19937 rng(3);
    std::uniform_int_distribution<std::size_t> size(1, 3000);
    Layout layout;
    for (int t = 0; t < 700; ++t) layout.sizes.push_back(size(rng));
    layout.sizes[350] = 0; // an empty tensor has no chunks and is never read
    for (const char *name : {"adam_l2_amsgrad", "lamb_decay", "sgd_nesterov_maximize"})
        for (const RuleCase &c : rule_cases())
            if (c.name == name)
                for (DType dtype : {DType::f32, DType::bf16}) {
                    Lockstep lockstep(device_options(c.options, dtype), layout, 17);
                    run_steps(lockstep, c.name + " 700 tensors " + dtype_name(dtype), 30, 2, dtype == DType::f32 ? 0 : 1);
                }
}

BOOST_AUTO_TEST_SUITE_END()

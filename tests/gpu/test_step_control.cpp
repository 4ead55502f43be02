// What the device decides on its own during a step: skipping a step with a non-finite
// gradient, clipping to the global norm, dynamic loss scaling for f16; that step() never waits
// for the device; restoring state; and clear errors for bad input.
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cmath>
#include <limits>
#include <vector>

#include "cuda_gate.hpp"
#include "gpu_support.hpp"
#include "shardopt/error.hpp"

using namespace shardopt;
using gpu_test::GradSpec;
using gpu_test::Layout;
using gpu_test::Lockstep;

namespace {

Layout small_layout() {
    Layout layout;
    layout.sizes = {1, 3, 100003, 17, 4096};
    layout.param_shift = layout.grad_shift = 1;
    return layout;
}

cuda::DeviceOptimizerOptions adam_options(DType dtype) {
    cuda::DeviceOptimizerOptions o;
    o.optimizer = OptimizerOptions::defaults(OptimizerKind::adam);
    o.optimizer.weight_decay = 0.01;
    o.optimizer.amsgrad = true;
    o.dtype = dtype;
    o.loss_scaling.mode = cuda::LossScaling::none;
    return o;
}

bool has_code(const Error &e, ErrorCode code) { return e.code() == code; }

} // namespace

BOOST_AUTO_TEST_SUITE(step_control)

BOOST_AUTO_TEST_CASE(nonfinite_gradient_skips_the_step_on_the_device) {
    const float poisons[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                             -std::numeric_limits<float>::infinity()};
    for (DType dtype : {DType::f32, DType::bf16, DType::f16})
        for (float poison : poisons) {
            BOOST_TEST_CONTEXT(dtype_name(dtype) << " gradient " << poison) {
                Lockstep lockstep(adam_options(dtype), small_layout(), 5);
                for (int s = 0; s < 3; ++s) BOOST_TEST(lockstep.step().master_ulp <= 2);
                GradSpec bad;
                bad.poison = true;
                bad.poison_value = poison;
                bad.poison_tensor = 2;
                bad.poison_index = 777;
                const auto skipped = lockstep.step(bad);
                BOOST_TEST(skipped.skipped);
                BOOST_TEST(skipped.unchanged); // parameters, master weights and state untouched
                BOOST_TEST(skipped.info.steps == 3);
                BOOST_TEST(skipped.info.skipped_steps == 1);
                BOOST_TEST(!std::isfinite(skipped.info.last_grad_norm));
                const auto next = lockstep.step(); // continues as step 4
                BOOST_TEST(!next.skipped);
                BOOST_TEST(next.info.steps == 4);
                BOOST_TEST(next.master_ulp <= 2);
                BOOST_TEST(next.state_ulp <= 2);
            }
        }
}

// A skipped first step must not count as the first: SGD then still starts its momentum buffer
// at the gradient on the first applied step.
BOOST_AUTO_TEST_CASE(skipped_first_step_leaves_sgd_momentum_unstarted) {
    cuda::DeviceOptimizerOptions o = adam_options(DType::f32);
    o.optimizer = OptimizerOptions::defaults(OptimizerKind::sgd);
    o.optimizer.momentum = 0.9;
    o.optimizer.dampening = 0.5;
    o.optimizer.lr = 0.1;
    Lockstep lockstep(o, small_layout(), 9);
    GradSpec bad;
    bad.poison = true;
    bad.poison_value = std::numeric_limits<float>::infinity();
    const auto skipped = lockstep.step(bad);
    BOOST_TEST(skipped.skipped);
    BOOST_TEST(skipped.unchanged);
    BOOST_TEST(skipped.info.steps == 0);
    const auto first = lockstep.step();
    BOOST_TEST(first.info.steps == 1);
    BOOST_TEST(first.master_ulp <= 2);
    BOOST_TEST(first.state_ulp <= 2);
}

BOOST_AUTO_TEST_CASE(clipping_by_global_norm) {
    for (OptimizerKind kind : {OptimizerKind::adam, OptimizerKind::lamb})
        for (DType dtype : {DType::f32, DType::bf16}) {
            BOOST_TEST_CONTEXT(optimizer_kind_name(kind) << " " << dtype_name(dtype)) {
                cuda::DeviceOptimizerOptions o = adam_options(dtype);
                o.optimizer = OptimizerOptions::defaults(kind);
                o.max_grad_norm = 0.5; // the gradients' norm is about 1e-2 * sqrt(104k) = 3.2
                Lockstep lockstep(o, small_layout(), 21);
                for (int s = 0; s < 10; ++s) {
                    const auto check = lockstep.step();
                    double sum = 0.0;
                    for (float x : lockstep.last_grads()) sum += double(x) * double(x);
                    const double norm = std::sqrt(sum);
                    BOOST_TEST(check.info.last_grad_norm == norm, boost::test_tools::tolerance(1e-10));
                    const float expected = float(std::min(1.0, 0.5 / (norm + 1e-6)));
                    BOOST_TEST(expected < 1.0f);
                    BOOST_TEST(gpu_test::ulp_distance(check.info.last_grad_scale, expected) <= 1);
                    BOOST_TEST(check.master_ulp <= 2);
                    BOOST_TEST(check.state_ulp <= 2);
                    BOOST_TEST(check.param_ulp <= (dtype == DType::f32 ? 0 : 1));
                }
            }
        }
    // Below the limit nothing is scaled.
    cuda::DeviceOptimizerOptions o = adam_options(DType::f32);
    o.max_grad_norm = 1e6;
    Lockstep lockstep(o, small_layout(), 22);
    BOOST_TEST(lockstep.step().info.last_grad_scale == 1.0f);
}

// torch.cuda.amp.GradScaler's rule: backoff 0.5 on an overflow (and the step skipped), growth
// x2 after growth_interval good steps in a row.
BOOST_AUTO_TEST_CASE(f16_dynamic_loss_scale_grows_and_backs_off) {
    cuda::DeviceOptimizerOptions o = adam_options(DType::f16);
    o.loss_scaling.mode = cuda::LossScaling::automatic; // dynamic for f16
    o.loss_scaling.init_scale = 1024.0;
    o.loss_scaling.growth_interval = 3;
    Lockstep lockstep(o, small_layout(), 31);
    BOOST_TEST(lockstep.optimizer().step_info().loss_scale == 1024.0f);

    auto check = lockstep.step();
    BOOST_TEST(check.info.last_grad_scale == 1.0f / 1024.0f); // the gradients were unscaled
    BOOST_TEST(check.info.loss_scale == 1024.0f);
    BOOST_TEST(check.info.growth_tracker == 1);
    BOOST_TEST(check.master_ulp <= 2);
    check = lockstep.step();
    BOOST_TEST(check.info.growth_tracker == 2);
    check = lockstep.step();
    BOOST_TEST(check.info.loss_scale == 2048.0f);
    BOOST_TEST(check.info.growth_tracker == 0);
    BOOST_TEST(check.info.steps == 3);
    BOOST_TEST(check.master_ulp <= 2);

    GradSpec overflow; // a scaled gradient past f16's range becomes Inf
    overflow.poison = true;
    overflow.poison_value = 1e6f;
    overflow.poison_tensor = 4;
    overflow.poison_index = 5;
    check = lockstep.step(overflow);
    BOOST_TEST(check.skipped);
    BOOST_TEST(check.unchanged);
    BOOST_TEST(check.info.loss_scale == 1024.0f);
    BOOST_TEST(check.info.growth_tracker == 0);
    BOOST_TEST(check.info.steps == 3);

    check = lockstep.step();
    BOOST_TEST(!check.skipped);
    BOOST_TEST(check.info.steps == 4);
    BOOST_TEST(check.info.last_grad_scale == 1.0f / 1024.0f);
    BOOST_TEST(check.info.growth_tracker == 1);
    BOOST_TEST(check.master_ulp <= 2);
    BOOST_TEST(check.param_ulp <= 1);

    float on_device = 0.0f; // what a caller multiplies its loss by, without a host round trip
    gpu_test::cuda_ok(cudaMemcpy(&on_device, lockstep.optimizer().device_loss_scale(), sizeof on_device,
                                 cudaMemcpyDeviceToHost),
                      "reading the device loss scale");
    BOOST_TEST(on_device == 1024.0f);
}

BOOST_AUTO_TEST_CASE(step_returns_without_waiting_for_the_device) {
    for (bool clipping : {false, true}) {
        cuda::DeviceOptimizerOptions o = adam_options(DType::bf16);
        o.max_grad_norm = clipping ? 1.0 : 0.0;
        o.skip_nonfinite = clipping; // with and without the norm pass
        Lockstep lockstep(o, small_layout(), 41);
        lockstep.step(); // valid gradients on the device; the kernels are loaded
        const int64_t before = lockstep.optimizer().step_info().steps;

        // A second gradient buffer, so one step also rebinds the gradient pointers.
        std::vector<const void *> grads = lockstep.grad_pointers();
        std::vector<std::unique_ptr<gpu_test::DeviceMemory>> copies;
        std::vector<const void *> other;
        for (std::size_t t = 0; t < grads.size(); ++t) {
            const std::size_t bytes = lockstep.optimizer().tensor_size(int(t)) * 2;
            copies.push_back(std::make_unique<gpu_test::DeviceMemory>(bytes));
            gpu_test::cuda_ok(cudaMemcpy(copies.back()->get(), grads[t], bytes, cudaMemcpyDeviceToDevice), "copy");
            other.push_back(copies.back()->get());
        }

        gpu_test::Gate gate; // holds the stream: a step() that synchronized would not return until it opens
        gpu_test::cuda_ok(gate.enqueue(lockstep.stream()), "cudaLaunchHostFunc");
        const auto t0 = std::chrono::steady_clock::now();
        lockstep.optimizer().step(grads, lockstep.stream());
        lockstep.optimizer().step(other, lockstep.stream());
        lockstep.optimizer().step(grads, lockstep.stream());
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const cudaError_t pending = cudaStreamQuery(lockstep.stream());
        gate.open();
        gpu_test::cuda_ok(cudaStreamSynchronize(lockstep.stream()), "cudaStreamSynchronize");

        BOOST_TEST_CONTEXT("clipping and finite check " << (clipping ? "on" : "off")) {
            BOOST_TEST(seconds < 5.0);
            BOOST_TEST(pending == cudaErrorNotReady); // the steps were still queued behind the gate
            BOOST_TEST(!gate.timed_out());
            BOOST_TEST(lockstep.optimizer().step_info().steps == before + 3);
        }
    }
}

BOOST_AUTO_TEST_CASE(restore_master_state_and_counters) {
    cuda::DeviceOptimizerOptions o = adam_options(DType::bf16);
    Lockstep lockstep(o, small_layout(), 51);
    lockstep.step();
    auto &opt = lockstep.optimizer();
    const std::size_t n = opt.tensor_size(3);
    std::vector<float> master(n), back(n);
    for (std::size_t i = 0; i < n; ++i) master[i] = 0.25f * float(i) - 1.0f;
    opt.write_master(3, master.data());
    opt.read_master(3, back.data());
    BOOST_TEST(back == master);
    for (int k = 0; k < opt.state_slots(); ++k) {
        for (std::size_t i = 0; i < n; ++i) master[i] = float(k + 1) * 1e-3f * float(i);
        opt.write_state(3, k, master.data());
        opt.read_state(3, k, back.data());
        BOOST_TEST(back == master);
    }
    opt.set_step_count(41);
    BOOST_TEST(opt.step_info().steps == 41);
    lockstep.resync();
    const auto check = lockstep.step(); // the reference picks up the restored values
    BOOST_TEST(check.info.steps == 42);
    BOOST_TEST(check.master_ulp <= 2);
    BOOST_TEST(check.param_ulp <= 1);
    BOOST_CHECK_EXCEPTION(opt.set_loss_scale(2.0), Error, [](const Error &e) { return has_code(e, ErrorCode::invalid_state); });
}

BOOST_AUTO_TEST_CASE(bad_input_is_refused_with_clear_errors) {
    gpu_test::DeviceMemory memory(4096);
    // Every byte defined before the optimizer sees it: the tensors (bytes 0..76; for f32 the
    // parameters are the master weights that the update reads) and the gradients (from 1024).
    gpu_test::cuda_ok(cudaMemset(memory.get(), 0, 4096), "cudaMemset");
    std::vector<float> host(16);
    const auto invalid = [](const Error &e) { return has_code(e, ErrorCode::invalid_argument); };
    cuda::DeviceOptimizerOptions o = adam_options(DType::f32);
    const std::vector<cuda::DeviceTensor> good{{memory.get(), 16}, {memory.get() + 64, 3}};

    BOOST_CHECK_EXCEPTION(cuda::DeviceOptimizer::create({}, o), Error, invalid);
    BOOST_CHECK_EXCEPTION(cuda::DeviceOptimizer::create({{nullptr, 4}}, o), Error, invalid);
    BOOST_CHECK_EXCEPTION(cuda::DeviceOptimizer::create({{host.data(), 4}}, o), Error, invalid); // host memory
    BOOST_CHECK_EXCEPTION(cuda::DeviceOptimizer::create({{memory.get() + 2, 4}}, o), Error, invalid); // misaligned f32
    auto bad = o;
    bad.dtype = DType::f64;
    BOOST_CHECK_EXCEPTION(cuda::DeviceOptimizer::create(good, bad), Error, invalid);
    bad = o;
    bad.device = cuda::device_count();
    BOOST_CHECK_EXCEPTION(cuda::DeviceOptimizer::create(good, bad), Error, invalid);
    bad = o;
    bad.optimizer.lr = -1.0;
    BOOST_CHECK_EXCEPTION(cuda::DeviceOptimizer::create(good, bad), Error, invalid);
    bad = o;
    bad.loss_scaling.mode = cuda::LossScaling::dynamic;
    bad.skip_nonfinite = false;
    BOOST_CHECK_EXCEPTION(cuda::DeviceOptimizer::create(good, bad), Error, invalid);
    bad = o;
    bad.max_grad_norm = -1.0;
    BOOST_CHECK_EXCEPTION(cuda::DeviceOptimizer::create(good, bad), Error, invalid);

    auto opt = cuda::DeviceOptimizer::create(good, o);
    const void *one[] = {memory.get() + 1024};
    BOOST_CHECK_EXCEPTION(opt->step(one, 1, nullptr), Error, invalid); // wrong count
    const void *null_grad[] = {memory.get() + 1024, nullptr};
    BOOST_CHECK_EXCEPTION(opt->step(null_grad, 2, nullptr), Error, invalid);
    const void *host_grad[] = {memory.get() + 1024, host.data()};
    BOOST_CHECK_EXCEPTION(opt->step(host_grad, 2, nullptr), Error, invalid);
    BOOST_CHECK_EXCEPTION(opt->step(nullptr, 2, nullptr), Error, invalid);
    BOOST_CHECK_EXCEPTION(opt->read_state(0, opt->state_slots(), host.data()), Error, invalid);
    BOOST_CHECK_EXCEPTION(opt->read_master(2, host.data()), Error, invalid);
    BOOST_CHECK_EXCEPTION(opt->set_lr(std::nan("")), Error, invalid);
    // After the refusals the optimizer still works.
    const void *grads[] = {memory.get() + 1024, memory.get() + 2048};
    opt->step(grads, 2, nullptr);
    BOOST_TEST(opt->step_info().steps == 1);
}

BOOST_AUTO_TEST_SUITE_END()

// DeviceOptimizer over CUDA: owns the device tables, master weights and state, and turns each
// step() into a fixed sequence of launches on the caller's stream (see device_optimizer.hpp).
// Nothing in step() waits for the device: the gradient pointers travel in kernel arguments,
// and every decision that depends on the gradients is taken by a kernel.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "chunk_plan.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/event_wait.hpp"
#include "cuda/cuda_device.hpp"
#include "cuda/cuda_event.hpp"
#include "cuda/device_buffer.hpp"
#include "cuda/device_upload.hpp"
#include "launch.hpp"
#include "lowbit_state.hpp"
#include "shardopt/comm.hpp"
#include "shardopt/device_optimizer.hpp"
#include "shardopt/error.hpp"

namespace shardopt::cuda {
namespace {

using namespace detail;

std::string index_name(const char *what, std::size_t i) { return std::string(what) + "[" + std::to_string(i) + "]"; }

void require_finite_at_least(const char *field, double value, double lo, bool strictly) {
    const bool ok = std::isfinite(value) && (strictly ? value > lo : value >= lo);
    require(ok, ErrorCode::invalid_argument,
            std::string(field) + " must be " + (strictly ? "> " : ">= ") + std::to_string(lo) + ", got " +
                std::to_string(value));
}

bool dynamic_scaling(const DeviceOptimizerOptions &o) {
    return o.loss_scaling.mode == LossScaling::dynamic ||
           (o.loss_scaling.mode == LossScaling::automatic && o.dtype == DType::f16);
}

// Everything about the options that does not need the device; also what makes the CPU rule
// (options.optimizer.validate() and the slot count).
void validate(const DeviceOptimizerOptions &o) {
    o.optimizer.validate();
    // Kernels exist for these rules only (the other rules of issue 37 are CPU-only yet). Low-bit
    // state: Adam, AdamW and SGD with momentum, without amsgrad (optimizer.validate() refuses the rest).
    const OptimizerKind k = o.optimizer.kind;
    require(k == OptimizerKind::sgd || k == OptimizerKind::adam || k == OptimizerKind::adamw ||
                k == OptimizerKind::rmsprop || k == OptimizerKind::adagrad || k == OptimizerKind::lamb ||
                k == OptimizerKind::lion || k == OptimizerKind::adamax || k == OptimizerKind::adadelta,
            ErrorCode::unsupported,
            std::string("the CUDA optimizer has no kernels for ") + optimizer_kind_name(k) + " yet: use host memory");
    require(o.dtype == DType::f32 || o.dtype == DType::bf16 || o.dtype == DType::f16, ErrorCode::invalid_argument,
            std::string("dtype must be f32, bf16 or f16 (bf16/f16 keep fp32 master weights), got ") +
                dtype_name(o.dtype));
    require_finite_at_least("max_grad_norm", o.max_grad_norm, 0.0, false);
    const LossScalerOptions &s = o.loss_scaling;
    require(s.mode == LossScaling::automatic || s.mode == LossScaling::none || s.mode == LossScaling::dynamic,
            ErrorCode::invalid_argument, "loss_scaling.mode " + std::to_string(int(s.mode)) + " is not a mode");
    if (dynamic_scaling(o)) {
        require_finite_at_least("loss_scaling.init_scale", s.init_scale, 0.0, true);
        require(s.init_scale <= 3.4e38, ErrorCode::invalid_argument, "loss_scaling.init_scale must fit a float");
        require_finite_at_least("loss_scaling.growth_factor", s.growth_factor, 1.0, true);
        require(std::isfinite(s.backoff_factor) && s.backoff_factor > 0.0 && s.backoff_factor < 1.0,
                ErrorCode::invalid_argument, "loss_scaling.backoff_factor must be in (0, 1)");
        require(s.growth_interval > 0, ErrorCode::invalid_argument, "loss_scaling.growth_interval must be > 0");
        require(o.skip_nonfinite, ErrorCode::invalid_argument,
                "dynamic loss scaling needs skip_nonfinite: an overflowed step must be skipped");
    }
}

uint32_t update_flags(const OptimizerOptions &o) {
    uint32_t flags = 0;
    if (o.weight_decay != 0.0) flags |= kWeightDecay;
    if (o.kind == OptimizerKind::adamw) flags |= kDecoupled;
    if (o.amsgrad) flags |= kAmsgrad;
    if (o.momentum > 0.0) flags |= kMomentum;
    if (o.nesterov) flags |= kNesterov;
    if (o.centered) flags |= kCentered;
    return flags;
}

class CudaOptimizer final : public SlicedOptimizer {
  public:
    CudaOptimizer(const std::vector<DeviceTensor> &params, const std::vector<TensorSlice> &slices,
                  const DeviceOptimizerOptions &options, int device, Stream stream);
    ~CudaOptimizer() override;

    using DeviceOptimizer::step;
    void step(const void *const *grads, std::size_t grad_count, Stream stream) override;
    void begin_step(const void *const *grads, std::size_t grad_count, Stream stream, float *tops) override;
    void finish_step(const float *tops, Stream stream) override;
    bool shares_blocks() const noexcept override { return lowbit_.shares(); }
    void set_lr(double lr) override;
    const DeviceOptimizerOptions &options() const noexcept override { return options_; }
    int tensor_count() const noexcept override { return int(params_.size()); }
    std::size_t tensor_size(int tensor) const override { return params_.at(checked(tensor)).count; }
    int state_slots() const noexcept override { return slots_; }
    const float *device_loss_scale() const noexcept override {
        return reinterpret_cast<const float *>(control_.as<char>() + offsetof(StepControl, loss_scale));
    }
    StepInfo step_info() override;
    void read_master(int tensor, float *host) override;
    void read_state(int tensor, int slot, float *host) override;
    void write_master(int tensor, const float *host) override;
    void write_state(int tensor, int slot, const float *host) override;
    void write_state(int tensor, int slot, const float *host, double first_top, double last_top) override;
    void set_step_count(int64_t steps) override;
    void set_loss_scale(double scale) override;

  private:
    bool mixed() const { return options_.dtype != DType::f32; }
    std::size_t checked(int tensor) const;
    float *master_of(std::size_t t) const;
    float *state_of(std::size_t t, int slot) const;
    bool quantized(std::size_t t) const { return lowbit_.quantized(t); }
    LowbitState::Copy copier() {
        return [this](void *dst, const void *src, std::size_t bytes, cudaMemcpyKind kind, const char *what) {
            copy(dst, src, bytes, kind, what);
        };
    }
    void prepare(const void *const *grads, std::size_t grad_count, cudaStream_t stream);
    void update(cudaStream_t stream);
    void bind_grads(const void *const *grads, cudaStream_t stream);
    StepHyper hyper() const;
    void wait_for(cudaStream_t stream, const char *what);
    void wait_last_stream();
    void copy(void *dst, const void *src, std::size_t bytes, cudaMemcpyKind kind, const char *what);
    // The element-wise kernels' launch over every chunk of every tensor, on `stream`.
    ChunkLaunch chunk_launch(cudaStream_t stream) const;

    DeviceOptimizerOptions options_;
    int device_;
    std::vector<DeviceTensor> params_;
    int slots_ = 0;
    uint32_t flags_ = 0;
    bool norm_pass_ = false;
    ChunkPlan plan_;       // every tensor: the norm pass, the master weights
    ChunkPlan state_plan_; // the tensors with full-precision state: their update chunks and fp32 state
    DeviceBuffer tensors_, chunks_, tensor_chunks_, master_, state_, norm_partials_, lamb_partials_, tensor_lr_;
    DeviceBuffer update_chunks_; // state_plan_'s chunks when some tensors are quantized (else chunks_ serves)
    // Low-bit state (lowbit.hpp's format over each tensor's slice; blocks that other ranks share
    // are scaled by the maxima that finish_step is given).
    StatePrecision precision_ = StatePrecision::full;
    LowbitState lowbit_;
    DeviceBuffer control_, scalars_;
    std::vector<const void *> bound_grads_; // what the device table points at
    cudaStream_t last_stream_ = nullptr;    // where the last work on this optimizer was enqueued
    Event done_;                            // wait_for's
};

CudaOptimizer::CudaOptimizer(const std::vector<DeviceTensor> &params, const std::vector<TensorSlice> &slices,
                             const DeviceOptimizerOptions &options, int device, Stream stream)
    : options_(options), device_(device), params_(params), last_stream_(stream) {
    done_.create();
    const std::unique_ptr<Optimizer> rule = Optimizer::create(options.optimizer); // slot count, initial values
    slots_ = rule->state_slots();
    flags_ = update_flags(options.optimizer);
    // The sum-of-squares pass feeds clipping, the finite check and loss scaling; without any of
    // them the step reads each gradient once, in the update.
    norm_pass_ = options.max_grad_norm > 0.0 || options.skip_nonfinite || dynamic_scaling(options);

    const std::size_t elem = dtype_size(options.dtype);
    std::vector<std::size_t> counts(params.size());
    std::vector<std::uintptr_t> addresses(params.size());
    for (std::size_t t = 0; t < params.size(); ++t) {
        counts[t] = params[t].count;
        addresses[t] = reinterpret_cast<std::uintptr_t>(params[t].param);
        if (params[t].count > 0) require_device_memory(params[t].param, elem, device_, index_name("params", t));
    }
    plan_ = plan_chunks(counts, addresses, elem);
    // Quantized tensors keep codes and scales instead of fp32 state, and take the low-bit kernel.
    precision_ = options.optimizer.state_precision;
    lowbit_ = LowbitState(precision_, slots_, counts, slices);
    std::vector<std::size_t> state_counts = counts;
    for (std::size_t t = 0; t < params.size(); ++t)
        if (quantized(t)) state_counts[t] = 0;
    state_plan_ = !lowbit_.any() ? plan_ : plan_chunks(state_counts, addresses, elem);

    const std::size_t fp32_bytes = std::size_t(plan_.fp32_elements) * sizeof(float);
    if (mixed()) master_ = DeviceBuffer(fp32_bytes, "master weights");
    state_ = DeviceBuffer(std::size_t(state_plan_.fp32_elements) * sizeof(float) * std::size_t(slots_),
                          "optimizer state");

    std::vector<TensorEntry> entries(params.size());
    for (std::size_t t = 0; t < params.size(); ++t) {
        entries[t].param = params[t].param;
        entries[t].master = master_of(t);
        if (!quantized(t))
            for (int k = 0; k < slots_; ++k) entries[t].state[k] = state_of(t, k);
        entries[t].count = int64_t(params[t].count);
    }
    const std::size_t chunk_count = plan_.chunks.size();
    tensors_ = upload(entries, "tensor table", stream);
    chunks_ = upload(plan_.chunks, "chunk table", stream);
    if (lowbit_.any()) {
        update_chunks_ = upload(state_plan_.chunks, "full-precision chunk table", stream);
        lowbit_.create(stream); // every code and scale 0, as the host space starts it (decodes to 0)
    }
    norm_partials_ = DeviceBuffer(std::max<std::size_t>(chunk_count, 1) * sizeof(double), "gradient norm partials");
    if (options.optimizer.kind == OptimizerKind::lamb) {
        tensor_chunks_ = upload(plan_.tensor_chunks, "LAMB tensor chunks", stream);
        lamb_partials_ = DeviceBuffer(std::max<std::size_t>(chunk_count, 1) * 2 * sizeof(double), "LAMB partials");
        tensor_lr_ = DeviceBuffer(params.size() * sizeof(float), "LAMB trust ratios");
    }

    StepControl control;
    control.loss_scale = dynamic_scaling(options) ? float(options.loss_scaling.init_scale) : 1.0f;
    control_ = upload(std::vector<StepControl>{control}, "step control", stream);
    scalars_ = DeviceBuffer(sizeof(StepScalars), "step scalars");

    for (std::size_t t = 0; t < params.size(); ++t) {
        const int64_t count = int64_t(params[t].count);
        if (mixed()) launch_master_from_params(master_of(t), params[t].param, count, options.dtype, stream);
    }
    for (int k = 0; k < slots_; ++k)
        launch_fill(state_.as<float>() + std::size_t(k) * std::size_t(state_plan_.fp32_elements),
                    state_plan_.fp32_elements, float(rule->state_initial_value(k)), stream);

    preload_tables();
    preload_step_control();
    if (norm_pass_) preload_grad_sumsq(options.dtype);
    switch (options.optimizer.kind) {
    case OptimizerKind::sgd:
        preload_sgd(options.dtype);
        if (lowbit_.any()) preload_lowbit_sgd(options.dtype, lowbit_.bits());
        break;
    case OptimizerKind::adam:
    case OptimizerKind::adamw:
        preload_adam(options.dtype);
        if (lowbit_.any()) preload_lowbit_adam(options.dtype, lowbit_.bits());
        break;
    case OptimizerKind::rmsprop: preload_rmsprop(options.dtype); break;
    case OptimizerKind::adagrad: preload_adagrad(options.dtype); break;
    case OptimizerKind::lamb: preload_lamb(options.dtype); break;
    case OptimizerKind::lion: preload_lion(options.dtype); break;
    case OptimizerKind::adamax: preload_adamax(options.dtype); break;
    case OptimizerKind::adadelta: preload_adadelta(options.dtype); break;
    case OptimizerKind::adafactor:
    case OptimizerKind::nadam:
    case OptimizerKind::muon: break; // no kernels yet: validate() refused them
    }
    bound_grads_.assign(params.size(), nullptr);
    wait_for(stream, "the optimizer's initialization");
}

CudaOptimizer::~CudaOptimizer() {
    try {
        DeviceGuard guard(device_); // the buffers are freed on their own device
        for (DeviceBuffer *buffer : {&tensors_, &chunks_, &tensor_chunks_, &master_, &state_, &norm_partials_,
                                     &lamb_partials_, &tensor_lr_, &control_, &scalars_, &update_chunks_})
            *buffer = DeviceBuffer();
        lowbit_.release();
        done_.destroy();
    } catch (...) { // the device is gone (process teardown): the buffers' destructors still run
    }
}

std::size_t CudaOptimizer::checked(int tensor) const {
    require(tensor >= 0 && tensor < int(params_.size()), ErrorCode::invalid_argument,
            "tensor " + std::to_string(tensor) + " out of range [0, " + std::to_string(params_.size()) + ")");
    return std::size_t(tensor);
}

float *CudaOptimizer::master_of(std::size_t t) const {
    if (!mixed()) return static_cast<float *>(params_[t].param);
    return master_.as<float>() + plan_.fp32_offsets[t];
}

float *CudaOptimizer::state_of(std::size_t t, int slot) const {
    return state_.as<float>() + std::size_t(slot) * std::size_t(state_plan_.fp32_elements) +
           state_plan_.fp32_offsets[t];
}

// Validates every gradient pointer (only the ones that changed cost a driver query), then
// rewrites the table entries that differ, in stream order.
void CudaOptimizer::bind_grads(const void *const *grads, cudaStream_t stream) {
    const std::size_t elem = dtype_size(options_.dtype);
    std::size_t first = params_.size(), last = 0;
    for (std::size_t t = 0; t < params_.size(); ++t) {
        if (params_[t].count == 0) continue; // never read
        require(grads[t] != nullptr, ErrorCode::invalid_argument, index_name("grads", t) + " must not be null");
        if (grads[t] == bound_grads_[t]) continue;
        require_device_memory(grads[t], elem, device_, index_name("grads", t));
        first = std::min(first, t);
        last = t;
    }
    for (std::size_t begin = first; begin <= last && begin < params_.size(); begin += kGradPatchSize) {
        GradPatch patch;
        patch.first = int32_t(begin);
        patch.count = int32_t(std::min<std::size_t>(kGradPatchSize, last + 1 - begin));
        for (int i = 0; i < patch.count; ++i) patch.grads[i] = grads[begin + std::size_t(i)];
        launch_set_grads(tensors_.as<TensorEntry>(), patch, stream);
        for (int i = 0; i < patch.count; ++i) bound_grads_[begin + std::size_t(i)] = grads[begin + std::size_t(i)];
    }
}

StepHyper CudaOptimizer::hyper() const {
    const OptimizerOptions &o = options_.optimizer;
    StepHyper h;
    h.kind = int32_t(o.kind);
    h.maximize = o.maximize ? 1 : 0;
    h.lr = o.lr;
    h.weight_decay = o.weight_decay;
    h.momentum = o.momentum;
    h.dampening = o.dampening;
    h.beta1 = o.beta1;
    h.beta2 = o.beta2;
    h.eps = o.eps;
    h.alpha = o.alpha;
    h.lr_decay = o.lr_decay;
    h.rho = o.rho;
    h.have_norm = norm_pass_ ? 1 : 0;
    h.skip_nonfinite = options_.skip_nonfinite ? 1 : 0;
    h.dynamic_scaling = dynamic_scaling(options_) ? 1 : 0;
    h.growth_interval = options_.loss_scaling.growth_interval;
    h.max_grad_norm = options_.max_grad_norm;
    h.growth_factor = options_.loss_scaling.growth_factor;
    h.backoff_factor = options_.loss_scaling.backoff_factor;
    return h;
}

void CudaOptimizer::step(const void *const *grads, std::size_t grad_count, Stream stream) {
    prepare(grads, grad_count, stream);
    update(stream);
}

void CudaOptimizer::begin_step(const void *const *grads, std::size_t grad_count, Stream stream, float *tops) {
    prepare(grads, grad_count, stream);
    if (!lowbit_.shares() || params_.empty()) return;
    DeviceGuard guard(device_);
    const LowbitLaunch maxima = lowbit_.launch(tensors_.as<TensorEntry>(), scalars_.as<StepScalars>(), flags_,
                                               options_.dtype, stream, true);
    if (options_.optimizer.kind == OptimizerKind::sgd) launch_lowbit_sgd(maxima);
    else launch_lowbit_adam(maxima);
    lowbit_.read_tops(tops, copier());
}

void CudaOptimizer::finish_step(const float *tops, Stream stream) {
    DeviceGuard guard(device_);
    if (lowbit_.shares()) lowbit_.write_tops(tops, copier());
    update(stream);
}

// Binds the gradients, the norm pass and the step's decisions (step control): what the update reads.
void CudaOptimizer::prepare(const void *const *grads, std::size_t grad_count, cudaStream_t stream) {
    require(grad_count == params_.size(), ErrorCode::invalid_argument,
            "step got " + std::to_string(grad_count) + " gradients for " + std::to_string(params_.size()) +
                " tensors");
    require(grads != nullptr, ErrorCode::invalid_argument, "grads must not be null");
    DeviceGuard guard(device_);
    bind_grads(grads, stream);
    const ChunkLaunch launch = chunk_launch(stream);
    if (norm_pass_ && launch.chunk_count > 0) launch_grad_sumsq(launch, norm_partials_.as<double>());
    launch_step_control(control_.as<StepControl>(), scalars_.as<StepScalars>(), norm_partials_.as<double>(),
                        norm_pass_ ? launch.chunk_count : 0, hyper(), stream);
    last_stream_ = stream;
}

ChunkLaunch CudaOptimizer::chunk_launch(cudaStream_t stream) const {
    ChunkLaunch launch;
    launch.tensors = tensors_.as<TensorEntry>();
    launch.chunks = chunks_.as<Chunk>();
    launch.chunk_count = int(plan_.chunks.size());
    launch.scalars = scalars_.as<StepScalars>();
    launch.flags = flags_;
    launch.dtype = options_.dtype;
    launch.stream = stream;
    return launch;
}

// The update of every tensor, after prepare() on the same stream.
void CudaOptimizer::update(cudaStream_t stream) {
    DeviceGuard guard(device_);
    ChunkLaunch launch = chunk_launch(stream);
    last_stream_ = stream;
    if (launch.chunk_count == 0) return;
    // The update: the full-precision tensors' chunks only, then the quantized tensors' groups.
    if (lowbit_.any()) {
        launch.chunks = update_chunks_.as<Chunk>();
        launch.chunk_count = int(state_plan_.chunks.size());
    }
    const LowbitLaunch low = lowbit_.launch(launch.tensors, launch.scalars, launch.flags, launch.dtype, stream, false);
    switch (options_.optimizer.kind) {
    case OptimizerKind::sgd:
        if (launch.chunk_count > 0) launch_sgd(launch);
        if (lowbit_.any()) launch_lowbit_sgd(low);
        break;
    case OptimizerKind::adam:
    case OptimizerKind::adamw:
        if (launch.chunk_count > 0) launch_adam(launch);
        if (lowbit_.any()) launch_lowbit_adam(low);
        break;
    case OptimizerKind::rmsprop: launch_rmsprop(launch); break;
    case OptimizerKind::adagrad: launch_adagrad(launch); break;
    case OptimizerKind::lamb: {
        LambBuffers lamb;
        lamb.partials = lamb_partials_.as<double>();
        lamb.tensor_chunks = tensor_chunks_.as<TensorChunks>();
        lamb.tensor_lr = tensor_lr_.as<float>();
        lamb.tensor_count = int(params_.size());
        launch_lamb(launch, lamb);
        break;
    }
    case OptimizerKind::lion: launch_lion(launch); break;
    case OptimizerKind::adamax: launch_adamax(launch); break;
    case OptimizerKind::adadelta: launch_adadelta(launch); break;
    case OptimizerKind::adafactor:
    case OptimizerKind::nadam:
    case OptimizerKind::muon: break; // no kernels yet: validate() refused them
    }
}

void CudaOptimizer::set_lr(double lr) {
    require(std::isfinite(lr) && lr >= 0.0, ErrorCode::invalid_argument, "lr must be >= 0, got " + std::to_string(lr));
    options_.optimizer.lr = lr;
}

// Waits for the work enqueued on `stream`, bounded by SHARDOPT_TIMEOUT_MS (else the
// communicators' default): a polled event, not cudaStreamSynchronize, so a hung device ends in
// Error(timeout) instead of a hang.
void CudaOptimizer::wait_for(cudaStream_t stream, const char *what) {
    check(cudaEventRecord(done_.get(), stream), (std::string("cudaEventRecord before waiting for ") + what).c_str());
    const Communicator::Duration limit = default_timeout_from_env();
    cuda::detail::wait_event(done_.get(), cuda::detail::Clock::now() + limit, {}, [&] {
        return "cuda optimizer (device " + std::to_string(device_) + "): waiting for " + what +
               " took longer than the timeout of " + std::to_string(limit.count()) + " ms (SHARDOPT_TIMEOUT_MS)";
    });
}

void CudaOptimizer::wait_last_stream() { wait_for(last_stream_, "the optimizer's last stream"); }

// Copies between the host (pageable memory) and the device after the stream's earlier work:
// waiting for that first, bounded, leaves the copy call itself (synchronous for pageable
// memory) only the copy to wait for.
void CudaOptimizer::copy(void *dst, const void *src, std::size_t bytes, cudaMemcpyKind kind, const char *what) {
    if (bytes == 0) return;
    wait_last_stream();
    check(cudaMemcpyAsync(dst, src, bytes, kind, last_stream_), what);
    wait_for(last_stream_, what);
}

StepInfo CudaOptimizer::step_info() {
    DeviceGuard guard(device_);
    wait_last_stream();
    StepControl c;
    copy(&c, control_.get(), sizeof c, cudaMemcpyDeviceToHost, "reading the step control block");
    StepInfo info;
    info.steps = c.steps;
    info.skipped_steps = c.skipped_steps;
    info.last_skipped = c.last_skipped != 0;
    info.last_grad_norm = c.last_grad_norm;
    info.last_grad_scale = c.last_grad_scale;
    info.loss_scale = c.loss_scale;
    info.growth_tracker = c.growth_tracker;
    return info;
}

void CudaOptimizer::read_master(int tensor, float *host) {
    const std::size_t t = checked(tensor);
    require(host != nullptr || params_[t].count == 0, ErrorCode::invalid_argument, "host buffer must not be null");
    DeviceGuard guard(device_);
    copy(host, master_of(t), params_[t].count * sizeof(float), cudaMemcpyDeviceToHost, "reading master weights");
}

void CudaOptimizer::read_state(int tensor, int slot, float *host) {
    const std::size_t t = checked(tensor);
    require(slot >= 0 && slot < slots_, ErrorCode::invalid_argument,
            "state slot " + std::to_string(slot) + " out of range [0, " + std::to_string(slots_) + ")");
    require(host != nullptr || params_[t].count == 0, ErrorCode::invalid_argument, "host buffer must not be null");
    DeviceGuard guard(device_);
    if (quantized(t)) return lowbit_.read(t, slot, host, copier()); // decoded, as the CPU's checkpoints hold it
    copy(host, state_of(t, slot), params_[t].count * sizeof(float), cudaMemcpyDeviceToHost, "reading optimizer state");
}

void CudaOptimizer::write_master(int tensor, const float *host) {
    const std::size_t t = checked(tensor);
    require(host != nullptr || params_[t].count == 0, ErrorCode::invalid_argument, "host buffer must not be null");
    DeviceGuard guard(device_);
    copy(master_of(t), host, params_[t].count * sizeof(float), cudaMemcpyHostToDevice, "writing master weights");
    if (mixed() && params_[t].count > 0) {
        launch_params_from_master(params_[t].param, master_of(t), int64_t(params_[t].count), options_.dtype,
                                  last_stream_);
        wait_last_stream();
    }
}

void CudaOptimizer::write_state(int tensor, int slot, const float *host) { write_state(tensor, slot, host, -1.0, -1.0); }

void CudaOptimizer::write_state(int tensor, int slot, const float *host, double first_top, double last_top) {
    const std::size_t t = checked(tensor);
    require(slot >= 0 && slot < slots_, ErrorCode::invalid_argument,
            "state slot " + std::to_string(slot) + " out of range [0, " + std::to_string(slots_) + ")");
    require(host != nullptr || params_[t].count == 0, ErrorCode::invalid_argument, "host buffer must not be null");
    DeviceGuard guard(device_);
    if (quantized(t)) return lowbit_.write(t, slot, host, first_top, last_top, copier());
    copy(state_of(t, slot), host, params_[t].count * sizeof(float), cudaMemcpyHostToDevice, "writing optimizer state");
}

void CudaOptimizer::set_step_count(int64_t steps) {
    require(steps >= 0, ErrorCode::invalid_argument, "step count must be >= 0");
    DeviceGuard guard(device_);
    copy(control_.as<char>() + offsetof(StepControl, steps), &steps, sizeof steps, cudaMemcpyHostToDevice,
         "writing the step count");
}

void CudaOptimizer::set_loss_scale(double scale) {
    require(std::isfinite(scale) && scale > 0.0 && scale <= 3.4e38, ErrorCode::invalid_argument,
            "loss scale must be a positive finite float");
    require(dynamic_scaling(options_), ErrorCode::invalid_state, "this optimizer does not scale the loss");
    const float value = float(scale);
    const int32_t tracker = 0;
    DeviceGuard guard(device_);
    copy(control_.as<char>() + offsetof(StepControl, loss_scale), &value, sizeof value, cudaMemcpyHostToDevice,
         "writing the loss scale");
    copy(control_.as<char>() + offsetof(StepControl, growth_tracker), &tracker, sizeof tracker,
         cudaMemcpyHostToDevice, "writing the loss-scale growth tracker");
}

} // namespace

std::unique_ptr<DeviceOptimizer> DeviceOptimizer::create(const std::vector<DeviceTensor> &params,
                                                         const DeviceOptimizerOptions &options, Stream stream) {
    validate(options);
    require(!params.empty(), ErrorCode::invalid_argument, "the optimizer needs at least one parameter tensor");
    const int device = resolve_device(options.device);
    DeviceGuard guard(device);
    return std::make_unique<CudaOptimizer>(params, std::vector<TensorSlice>(params.size()), options, device, stream);
}

namespace detail {

std::unique_ptr<SlicedOptimizer> create_sliced_optimizer(const std::vector<DeviceTensor> &params,
                                                         const std::vector<TensorSlice> &slices,
                                                         const DeviceOptimizerOptions &options, Stream stream) {
    validate(options);
    require(!params.empty(), ErrorCode::invalid_argument, "the optimizer needs at least one parameter tensor");
    require(slices.size() == params.size(), ErrorCode::invalid_argument,
            std::to_string(slices.size()) + " slices for " + std::to_string(params.size()) + " tensors");
    const int device = resolve_device(options.device);
    DeviceGuard guard(device);
    return std::make_unique<CudaOptimizer>(params, slices, options, device, stream);
}

} // namespace detail

} // namespace shardopt::cuda

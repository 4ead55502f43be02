#include "gpu_support.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "shardopt/half.hpp"

namespace gpu_test {

void cuda_ok(cudaError_t status, const char *what) {
    BOOST_REQUIRE_MESSAGE(status == cudaSuccess,
                          what << " failed: " << cudaGetErrorName(status) << ": " << cudaGetErrorString(status));
}

DeviceMemory::DeviceMemory(std::size_t bytes) { cuda_ok(cudaMalloc(&ptr_, std::max<std::size_t>(bytes, 16)), "cudaMalloc"); }
DeviceMemory::~DeviceMemory() { (void)cudaFree(ptr_); }

namespace {

// Integers in the order of the floats they encode (-0 and +0 both 0).
int64_t ordered(float f) {
    int32_t i;
    std::memcpy(&i, &f, 4);
    return i >= 0 ? int64_t(i) : int64_t(std::numeric_limits<int32_t>::min()) - int64_t(i);
}

int64_t ordered_16(uint16_t h) { return (h & 0x8000u) ? -int64_t(h & 0x7fffu) : int64_t(h); }

bool is_nan_16(uint16_t h, bool bf16) {
    return bf16 ? (h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0 : (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0;
}

} // namespace

int64_t ulp_distance(float a, float b) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : std::numeric_limits<int64_t>::max();
    return std::abs(ordered(a) - ordered(b));
}

int64_t ulp_distance_16(uint16_t a, uint16_t b, bool bf16) {
    if (is_nan_16(a, bf16) || is_nan_16(b, bf16))
        return is_nan_16(a, bf16) && is_nan_16(b, bf16) ? 0 : std::numeric_limits<int64_t>::max();
    return std::abs(ordered_16(a) - ordered_16(b));
}

uint32_t to_bits(float value, DType dtype) {
    switch (dtype) {
    case DType::bf16: return bf16::from_float(value);
    case DType::f16: return f16::from_float(value);
    default: {
        uint32_t u;
        std::memcpy(&u, &value, 4);
        return u;
    }
    }
}

float from_bits(uint32_t bits, DType dtype) {
    switch (dtype) {
    case DType::bf16: {
        bf16 h;
        h.bits = uint16_t(bits);
        return float(h);
    }
    case DType::f16: {
        f16 h;
        h.bits = uint16_t(bits);
        return float(h);
    }
    default: {
        float f;
        std::memcpy(&f, &bits, 4);
        return f;
    }
    }
}

namespace {

// Element `bits` stored at element `index` of a flat byte buffer of elem-byte elements.
void put(std::vector<unsigned char> &bytes, std::size_t index, uint32_t bits, std::size_t elem) {
    if (elem == 4) std::memcpy(bytes.data() + index * 4, &bits, 4);
    else {
        const uint16_t half = uint16_t(bits);
        std::memcpy(bytes.data() + index * 2, &half, 2);
    }
}

uint32_t get(const std::vector<unsigned char> &bytes, std::size_t index, std::size_t elem) {
    if (elem == 4) {
        uint32_t bits;
        std::memcpy(&bits, bytes.data() + index * 4, 4);
        return bits;
    }
    uint16_t half;
    std::memcpy(&half, bytes.data() + index * 2, 2);
    return half;
}

} // namespace

Lockstep::Lockstep(const cuda::DeviceOptimizerOptions &options, const Layout &layout, uint32_t seed)
    : options_(options), layout_(layout), rng_(seed), elem_(dtype_size(options.dtype)) {
    std::size_t p = layout.param_shift, g = layout.grad_shift;
    for (std::size_t size : layout.sizes) {
        param_offsets_.push_back(p);
        grad_offsets_.push_back(g);
        p += size;
        g += size;
    }
    params_ = std::make_unique<DeviceMemory>(p * elem_);
    grads_device_ = std::make_unique<DeviceMemory>(g * elem_);
    cuda_ok(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");

    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<unsigned char> bytes(p * elem_);
    for (std::size_t t = 0; t < layout.sizes.size(); ++t)
        for (std::size_t i = 0; i < layout.sizes[t]; ++i)
            put(bytes, param_offsets_[t] + i, to_bits(normal(rng_), options.dtype), elem_);
    cuda_ok(cudaMemcpyAsync(params_->get(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice, stream_),
            "uploading parameters");
    cuda_ok(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");

    std::vector<cuda::DeviceTensor> tensors;
    for (std::size_t t = 0; t < layout.sizes.size(); ++t)
        tensors.push_back({params_->get() + param_offsets_[t] * elem_, layout.sizes[t]});
    optimizer_ = cuda::DeviceOptimizer::create(tensors, options, stream_);
    reference_ = Optimizer::create(options.optimizer);
    read_device(master_, state_, param_bits_);
    grads_.resize(layout.sizes.size());
    grad_bits_.resize(layout.sizes.size());
    for (std::size_t t = 0; t < layout.sizes.size(); ++t) {
        grads_[t].resize(layout.sizes[t]);
        grad_bits_[t].resize(layout.sizes[t]);
    }
}

Lockstep::~Lockstep() {
    optimizer_.reset();
    (void)cudaStreamDestroy(stream_);
}

std::vector<const void *> Lockstep::grad_pointers() const {
    std::vector<const void *> pointers;
    for (std::size_t t = 0; t < layout_.sizes.size(); ++t)
        pointers.push_back(grads_device_->get() + grad_offsets_[t] * elem_);
    return pointers;
}

void Lockstep::set_lr(double lr) {
    optimizer_->set_lr(lr);
    reference_->set_lr(lr);
}

void Lockstep::upload_grads() {
    const std::size_t total = layout_.sizes.empty() ? 0 : grad_offsets_.back() + layout_.sizes.back();
    std::vector<unsigned char> bytes(total * elem_);
    for (std::size_t t = 0; t < layout_.sizes.size(); ++t)
        for (std::size_t i = 0; i < layout_.sizes[t]; ++i) put(bytes, grad_offsets_[t] + i, grad_bits_[t][i], elem_);
    cuda_ok(cudaMemcpyAsync(grads_device_->get(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice, stream_),
            "uploading gradients");
    cuda_ok(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); // bytes is freed on return
}

void Lockstep::read_device(std::vector<std::vector<float>> &master, std::vector<std::vector<std::vector<float>>> &state,
                           std::vector<std::vector<uint32_t>> &params) {
    const std::size_t tensors = layout_.sizes.size();
    const int slots = optimizer_->state_slots();
    master.assign(tensors, {});
    state.assign(tensors, std::vector<std::vector<float>>(std::size_t(slots)));
    params.assign(tensors, {});
    for (std::size_t t = 0; t < tensors; ++t) {
        master[t].resize(layout_.sizes[t]);
        optimizer_->read_master(int(t), master[t].data());
        for (int k = 0; k < slots; ++k) {
            state[t][std::size_t(k)].resize(layout_.sizes[t]);
            optimizer_->read_state(int(t), k, state[t][std::size_t(k)].data());
        }
    }
    const std::size_t total = layout_.sizes.empty() ? 0 : param_offsets_.back() + layout_.sizes.back();
    std::vector<unsigned char> bytes(total * elem_);
    cuda_ok(cudaMemcpyAsync(bytes.data(), params_->get(), bytes.size(), cudaMemcpyDeviceToHost, stream_),
            "reading parameters");
    cuda_ok(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    for (std::size_t t = 0; t < tensors; ++t) {
        params[t].resize(layout_.sizes[t]);
        for (std::size_t i = 0; i < layout_.sizes[t]; ++i) params[t][i] = get(bytes, param_offsets_[t] + i, elem_);
    }
}

StepCheck Lockstep::step(const GradSpec &spec) {
    const cuda::StepInfo before = optimizer_->step_info();
    std::normal_distribution<float> normal(0.0f, spec.stddev);
    for (std::size_t t = 0; t < layout_.sizes.size(); ++t)
        for (std::size_t i = 0; i < layout_.sizes[t]; ++i) {
            float value = normal(rng_) * before.loss_scale; // the gradient of the scaled loss
            if (spec.poison && t == spec.poison_tensor && i == spec.poison_index) value = spec.poison_value;
            grad_bits_[t][i] = to_bits(value, options_.dtype);
            grads_[t][i] = from_bits(grad_bits_[t][i], options_.dtype);
        }
    upload_grads();
    optimizer_->step(grad_pointers(), stream_);

    StepCheck check;
    check.info = optimizer_->step_info();
    std::vector<std::vector<float>> master;
    std::vector<std::vector<std::vector<float>>> state;
    std::vector<std::vector<uint32_t>> params;
    read_device(master, state, params);
    check.unchanged = master == master_ && state == state_ && params == param_bits_;
    check.skipped = check.info.last_skipped;
    if (check.skipped) return check; // the tests look at `unchanged`; the reference does not move

    // The CPU reference steps from the device's previous values with the device's gradient
    // scale: grad * (1 / loss_scale * clip), one float multiply, as the kernels do.
    std::vector<std::vector<float>> ref_master = master_, scaled(layout_.sizes.size());
    std::vector<std::vector<std::vector<float>>> ref_state = state_;
    std::vector<Segment<float>> segments;
    for (std::size_t t = 0; t < layout_.sizes.size(); ++t) {
        scaled[t].resize(layout_.sizes[t]);
        for (std::size_t i = 0; i < layout_.sizes[t]; ++i) scaled[t][i] = grads_[t][i] * check.info.last_grad_scale;
        if (layout_.sizes[t] == 0) continue;
        Segment<float> seg;
        seg.param = ref_master[t].data();
        seg.grad = scaled[t].data();
        for (std::size_t k = 0; k < ref_state[t].size(); ++k) seg.state[k] = ref_state[t][k].data();
        seg.count = layout_.sizes[t];
        seg.tensor = int(t);
        segments.push_back(seg);
    }
    const int64_t step = check.info.steps;
    std::vector<double> stats(std::size_t(reference_->tensor_stats()) * layout_.sizes.size(), 0.0);
    if (reference_->tensor_stats() > 0)
        for (const auto &seg : segments) reference_->begin_step(seg, step, stats.data());
    for (const auto &seg : segments) reference_->apply(seg, step, stats.empty() ? nullptr : stats.data());

    const bool bf16 = options_.dtype == DType::bf16;
    for (std::size_t t = 0; t < layout_.sizes.size(); ++t)
        for (std::size_t i = 0; i < layout_.sizes[t]; ++i) {
            check.master_ulp = std::max(check.master_ulp, ulp_distance(master[t][i], ref_master[t][i]));
            for (std::size_t k = 0; k < state[t].size(); ++k)
                check.state_ulp = std::max(check.state_ulp, ulp_distance(state[t][k][i], ref_state[t][k][i]));
            if (options_.dtype != DType::f32)
                check.param_ulp = std::max(check.param_ulp,
                                           ulp_distance_16(uint16_t(params[t][i]),
                                                           uint16_t(to_bits(ref_master[t][i], options_.dtype)), bf16));
        }
    master_ = std::move(master);
    state_ = std::move(state);
    param_bits_ = std::move(params);
    return check;
}

} // namespace gpu_test

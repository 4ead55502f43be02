// Low-bit state on the GPU (src/optim/cuda/lowbit.cu) against the CPU's low-bit rule
// (lowbit_rules.cpp over host codes and scales): 8-bit and 4-bit Adam, AdamW and SGD with
// momentum over tensors that end in a partial block (5000, 9017) and one under
// lowbit::kMinElements (full-precision state, the ordinary kernels), step after step without
// resynchronizing: the parameters within the rule suite's 2 ulp and the decoded state equal to
// the CPU's. The kernels round every operation as the CPU rule does (no FMA, IEEE division and
// square root), so the moments are the same floats and their codes the same codes; a code off by
// one anywhere (a broken tie rule, the signed map's negative half not mirrored) shows as a decoded
// value that differs. Checkpoints: read_state / write_state carry decoded values into another
// optimizer, which then steps on as the first does.
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "../../src/optim/lowbit.hpp"
#include "gpu_support.hpp"

using namespace shardopt;
using gpu_test::DeviceMemory;

namespace {

// The tensors' sizes: not multiples of the blocks, one under the 4096 elements quantization starts
// at. A case may swap in others for its length (SizesFor).
const std::vector<std::size_t> kDefaultSizes = {5000, 1000, 9017};
std::vector<std::size_t> tensor_sizes = kDefaultSizes;

struct SizesFor {
    explicit SizesFor(std::vector<std::size_t> sizes) { tensor_sizes = std::move(sizes); }
    ~SizesFor() { tensor_sizes = kDefaultSizes; }
};

struct Case {
    std::string name;
    OptimizerOptions options;
};

std::vector<Case> cases(StatePrecision precision) {
    std::vector<Case> out;
    auto add = [&](const std::string &name, OptimizerKind kind, void (*tweak)(OptimizerOptions &)) {
        OptimizerOptions o = OptimizerOptions::defaults(kind);
        o.state_precision = precision;
        tweak(o);
        out.push_back({name + " " + state_precision_name(precision), o});
    };
    add("adam_l2", OptimizerKind::adam, [](OptimizerOptions &o) { o.weight_decay = 0.01; o.lr = 1e-2; });
    add("adamw_maximize", OptimizerKind::adamw, [](OptimizerOptions &o) { o.maximize = true; o.lr = 1e-2; });
    add("sgd_momentum_dampening_decay", OptimizerKind::sgd, [](OptimizerOptions &o) {
        o.lr = 0.05; o.momentum = 0.9; o.dampening = 0.1; o.weight_decay = 0.01;
    });
    add("sgd_nesterov", OptimizerKind::sgd, [](OptimizerOptions &o) { o.lr = 0.05; o.momentum = 0.9; o.nesterov = true; });
    return out;
}

// The CPU side: parameters (the fp32 master weights), and per tensor its state as the host
// space keeps it: codes and scales (all zero: state 0) for a quantized tensor, else floats.
struct Reference {
    std::unique_ptr<Optimizer> rule;
    std::vector<std::vector<float>> params;
    std::vector<std::vector<std::vector<std::uint8_t>>> codes; // [tensor][slot]
    std::vector<std::vector<std::vector<float>>> scales, state;

    Reference(const OptimizerOptions &options, const std::vector<std::vector<float>> &initial)
        : rule(Optimizer::create(options)), params(initial) {
        const StatePrecision p = options.state_precision;
        for (const auto &t : initial) {
            TensorShape shape;
            shape.count = t.size();
            codes.emplace_back();
            scales.emplace_back();
            state.emplace_back();
            for (int k = 0; k < rule->state_slots(); ++k) {
                if (rule->quantized(k, shape)) {
                    codes.back().emplace_back(lowbit::code_bytes(p, 0, t.size()), 0);
                    scales.back().emplace_back(lowbit::blocks_touched(p, 0, t.size()), 0.0f);
                    state.back().emplace_back();
                } else {
                    codes.back().emplace_back();
                    scales.back().emplace_back();
                    state.back().emplace_back(t.size(), float(rule->state_initial_value(k)));
                }
            }
        }
    }

    void step(int64_t step, const std::vector<std::vector<float>> &grads) {
        for (std::size_t t = 0; t < params.size(); ++t) {
            Segment<float> seg;
            seg.param = params[t].data();
            seg.grad = grads[t].data();
            seg.count = params[t].size();
            seg.tensor = int(t);
            seg.shape.count = seg.count;
            for (int k = 0; k < rule->state_slots(); ++k) {
                if (!codes[t][std::size_t(k)].empty())
                    seg.lowbit[k] = {codes[t][std::size_t(k)].data(), scales[t][std::size_t(k)].data()};
                else
                    seg.state[k] = state[t][std::size_t(k)].data();
            }
            rule->apply(seg, step, nullptr);
        }
    }

    // Slot k of tensor t as values (decoded as the CPU's checkpoints decode it).
    std::vector<float> values(std::size_t t, int k, StatePrecision p) const {
        if (codes[t][std::size_t(k)].empty()) return state[t][std::size_t(k)];
        std::vector<float> out(params[t].size());
        LowBitArray a{const_cast<std::uint8_t *>(codes[t][std::size_t(k)].data()),
                      const_cast<float *>(scales[t][std::size_t(k)].data())};
        lowbit::decode_slice(a, p, k == 0, 0, out.size(), out.data());
        return out;
    }
};

// The device side: the tensors back to back in one buffer of the dtype, and their gradients.
class Device {
  public:
    Device(const OptimizerOptions &rule, DType dtype, const std::vector<std::vector<float>> &initial, cudaStream_t stream)
        : dtype_(dtype), elem_(dtype_size(dtype)), stream_(stream) {
        for (const auto &t : initial) {
            offsets_.push_back(total_);
            total_ += t.size();
        }
        params_ = std::make_unique<DeviceMemory>(total_ * elem_);
        grads_ = std::make_unique<DeviceMemory>(total_ * elem_);
        std::vector<char> host(total_ * elem_);
        for (std::size_t t = 0; t < initial.size(); ++t)
            for (std::size_t i = 0; i < initial[t].size(); ++i) put(host, offsets_[t] + i, initial[t][i]);
        // On the optimizer's stream (a non-blocking stream is not ordered after the legacy one).
        gpu_test::cuda_ok(cudaMemcpyAsync(params_->get(), host.data(), host.size(), cudaMemcpyHostToDevice, stream),
                          "params");
        gpu_test::cuda_ok(cudaStreamSynchronize(stream), "params");
        cuda::DeviceOptimizerOptions o;
        o.optimizer = rule;
        o.dtype = dtype;
        o.loss_scaling.mode = cuda::LossScaling::none;
        std::vector<cuda::DeviceTensor> tensors;
        for (std::size_t t = 0; t < initial.size(); ++t)
            tensors.push_back({params_->get() + offsets_[t] * elem_, initial[t].size()});
        optimizer = cuda::DeviceOptimizer::create(tensors, o, stream);
    }

    void step(const std::vector<std::vector<float>> &grads) {
        std::vector<char> host(total_ * elem_);
        for (std::size_t t = 0; t < grads.size(); ++t)
            for (std::size_t i = 0; i < grads[t].size(); ++i) put(host, offsets_[t] + i, grads[t][i]);
        gpu_test::cuda_ok(cudaMemcpyAsync(grads_->get(), host.data(), host.size(), cudaMemcpyHostToDevice, stream_),
                          "grads");
        std::vector<const void *> pointers;
        for (std::size_t offset : offsets_) pointers.push_back(grads_->get() + offset * elem_);
        optimizer->step(pointers, stream_);
        gpu_test::cuda_ok(cudaStreamSynchronize(stream_), "step");
    }

    std::vector<float> master(std::size_t t, std::size_t count) {
        std::vector<float> out(count);
        optimizer->read_master(int(t), out.data());
        return out;
    }
    std::vector<float> state(std::size_t t, int k, std::size_t count) {
        std::vector<float> out(count);
        optimizer->read_state(int(t), k, out.data());
        return out;
    }
    // The bf16/f16 parameters as stored (empty for f32: the master weights are the parameters).
    std::vector<uint32_t> param_bits(std::size_t t, std::size_t count) {
        if (dtype_ == DType::f32) return {};
        std::vector<uint16_t> raw(count);
        gpu_test::cuda_ok(cudaMemcpyAsync(raw.data(), params_->get() + offsets_[t] * elem_, count * 2,
                                          cudaMemcpyDeviceToHost, stream_),
                          "params");
        gpu_test::cuda_ok(cudaStreamSynchronize(stream_), "params");
        return std::vector<uint32_t>(raw.begin(), raw.end());
    }

    std::unique_ptr<cuda::DeviceOptimizer> optimizer;

  private:
    void put(std::vector<char> &host, std::size_t i, float value) const {
        const uint32_t bits = gpu_test::to_bits(value, dtype_);
        if (elem_ == 4) std::memcpy(host.data() + i * 4, &bits, 4);
        else {
            const uint16_t half = uint16_t(bits);
            std::memcpy(host.data() + i * 2, &half, 2);
        }
    }

    DType dtype_;
    std::size_t elem_;
    cudaStream_t stream_;
    std::size_t total_ = 0;
    std::vector<std::size_t> offsets_;
    std::unique_ptr<DeviceMemory> params_, grads_;
};

// Values as the dtype stores them (the CPU steps the fp32 master weights from the same values).
std::vector<std::vector<float>> normals(uint32_t seed, uint64_t stream, float stddev, DType dtype) {
    std::vector<std::vector<float>> out;
    uint64_t index = 0;
    const uint64_t key = gpu_test::stream_key(seed, stream);
    for (std::size_t size : tensor_sizes) {
        out.emplace_back(size);
        for (float &x : out.back())
            x = gpu_test::from_bits(gpu_test::to_bits(gpu_test::standard_normal(key, index++) * stddev, dtype), dtype);
    }
    return out;
}

struct Mismatch {
    int64_t master_ulp = 0, param_ulp = 0;
    std::size_t state_differ = 0;
};

Mismatch compare(Device &device, const Reference &ref, StatePrecision p, DType dtype, int slots) {
    Mismatch m;
    for (std::size_t t = 0; t < tensor_sizes.size(); ++t) {
        const std::vector<float> master = device.master(t, tensor_sizes[t]);
        for (std::size_t i = 0; i < tensor_sizes[t]; ++i)
            m.master_ulp = std::max(m.master_ulp, gpu_test::ulp_distance(master[i], ref.params[t][i]));
        const std::vector<uint32_t> bits = device.param_bits(t, tensor_sizes[t]);
        for (std::size_t i = 0; i < bits.size(); ++i)
            m.param_ulp = std::max(m.param_ulp, gpu_test::ulp_distance_16(uint16_t(bits[i]),
                                                                          uint16_t(gpu_test::to_bits(ref.params[t][i], dtype)),
                                                                          dtype == DType::bf16));
        for (int k = 0; k < slots; ++k) {
            const std::vector<float> got = device.state(t, k, tensor_sizes[t]), want = ref.values(t, k, p);
            for (std::size_t i = 0; i < tensor_sizes[t]; ++i) m.state_differ += std::memcmp(&got[i], &want[i], 4) != 0;
        }
    }
    return m;
}

void run_case(const Case &c, DType dtype, int steps, uint32_t seed) {
    cudaStream_t stream = nullptr;
    gpu_test::cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
    {
        const std::vector<std::vector<float>> initial = normals(seed, 0, 1.0f, dtype);
        Device device(c.options, dtype, initial, stream);
        Reference ref(c.options, initial);
        const int slots = device.optimizer->state_slots();
        BOOST_REQUIRE(slots == ref.rule->state_slots());
        bool negative_m = false; // the signed map's mirrored half is exercised
        for (int s = 1; s <= steps; ++s) {
            // Gradients of two scales, so blocks differ in their scale.
            std::vector<std::vector<float>> grads = normals(seed, uint64_t(s), 1e-2f, dtype);
            for (auto &t : grads)
                for (std::size_t i = 0; i < t.size(); i += 7) t[i] = gpu_test::from_bits(gpu_test::to_bits(t[i] * 50.0f, dtype), dtype);
            device.step(grads);
            ref.step(s, grads);
            const Mismatch m = compare(device, ref, c.options.state_precision, dtype, slots);
            for (std::size_t t = 0; t < tensor_sizes.size() && !negative_m; ++t)
                for (float x : ref.values(t, 0, c.options.state_precision)) negative_m = negative_m || x < 0.0f;
            BOOST_TEST_CONTEXT(c.name << " " << dtype_name(dtype) << ", step " << s) {
                BOOST_TEST(device.optimizer->step_info().steps == s);
                BOOST_TEST(m.master_ulp <= 2);
                BOOST_TEST(m.param_ulp <= 1);
                BOOST_TEST(m.state_differ == 0u);
            }
            if (m.master_ulp > 2 || m.param_ulp > 1 || m.state_differ > 0) break;
        }
        BOOST_TEST(negative_m);
    }
    (void)cudaStreamDestroy(stream);
}

} // namespace

BOOST_AUTO_TEST_SUITE(lowbit_state)

BOOST_AUTO_TEST_CASE(eight_bit_matches_the_cpu_rule) {
    for (const Case &c : cases(StatePrecision::bits8)) run_case(c, DType::f32, 4, 21);
}

BOOST_AUTO_TEST_CASE(four_bit_matches_the_cpu_rule) {
    for (const Case &c : cases(StatePrecision::bits4)) run_case(c, DType::f32, 4, 22);
}

// bf16 parameters over fp32 master weights: the low-bit kernels' mixed-precision variant.
BOOST_AUTO_TEST_CASE(mixed_precision_matches_the_cpu_rule) {
    run_case(cases(StatePrecision::bits8)[1], DType::bf16, 3, 23);
    run_case(cases(StatePrecision::bits4)[0], DType::f16, 3, 24);
}

// More groups of 256 elements than an 8-bit launch has blocks (2048): each block takes several
// groups in turn, with the books loaded once, and a block cut by the tensor's end among the later
// ones. (4-bit launches a block per group: the same tensors at that precision.)
BOOST_AUTO_TEST_CASE(blocks_take_several_groups) {
    const SizesFor sizes({2048 * 256 + 3 * 256 + 77, 5000});
    run_case(cases(StatePrecision::bits8)[0], DType::f32, 2, 25);
    run_case(cases(StatePrecision::bits4)[2], DType::f32, 2, 26);
}

// read_state / write_state carry the decoded state into another optimizer as the CPU's
// checkpoints do (lowbit::decode_slice out, encode_slice in): it holds what a CPU restore of
// those values holds, and steps on as the CPU rule does from there. (Not always the first
// optimizer's codes: a signed block whose largest |value| is negative decodes it as
// -0.993 * scale, the map's most negative code, so a restore shrinks that block's scale; the CPU
// round trip does the same.)
BOOST_AUTO_TEST_CASE(checkpoint_round_trip) {
    for (StatePrecision p : {StatePrecision::bits8, StatePrecision::bits4})
        for (const Case &c : {cases(p)[0], cases(p)[2]}) {
            cudaStream_t stream = nullptr;
            gpu_test::cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
            {
                const std::vector<std::vector<float>> initial = normals(31, 0, 1.0f, DType::f32);
                Device first(c.options, DType::f32, initial, stream);
                for (int s = 1; s <= 2; ++s) first.step(normals(31, uint64_t(s), 1e-2f, DType::f32));
                Device second(c.options, DType::f32, normals(32, 0, 1.0f, DType::f32), stream);
                const int slots = first.optimizer->state_slots();
                std::vector<std::vector<float>> masters;
                for (std::size_t t = 0; t < tensor_sizes.size(); ++t) masters.push_back(first.master(t, tensor_sizes[t]));
                Reference restored(c.options, masters); // the CPU restore of the same checkpoint
                for (std::size_t t = 0; t < tensor_sizes.size(); ++t) {
                    second.optimizer->write_master(int(t), masters[t].data());
                    for (int k = 0; k < slots; ++k) {
                        const std::vector<float> values = first.state(t, k, tensor_sizes[t]);
                        second.optimizer->write_state(int(t), k, values.data());
                        auto &codes = restored.codes[t][std::size_t(k)];
                        if (codes.empty())
                            restored.state[t][std::size_t(k)] = values;
                        else
                            lowbit::encode_slice(LowBitArray{codes.data(), restored.scales[t][std::size_t(k)].data()}, p,
                                                 k == 0, 0, tensor_sizes[t], values.data());
                        BOOST_TEST_CONTEXT(c.name << " tensor " << t << " slot " << k) {
                            BOOST_TEST(second.state(t, k, tensor_sizes[t]) == restored.values(t, k, p));
                        }
                    }
                }
                second.optimizer->set_step_count(first.optimizer->step_info().steps);
                const std::vector<std::vector<float>> grads = normals(31, 3, 1e-2f, DType::f32);
                second.step(grads);
                restored.step(3, grads);
                const Mismatch m = compare(second, restored, p, DType::f32, slots);
                BOOST_TEST_CONTEXT(c.name << ", the step after the restore") {
                    BOOST_TEST(m.master_ulp <= 2);
                    BOOST_TEST(m.state_differ == 0u);
                }
            }
            (void)cudaStreamDestroy(stream);
        }
}

BOOST_AUTO_TEST_SUITE_END()

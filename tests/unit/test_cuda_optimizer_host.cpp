// The parts of the CUDA optimizer that run on any machine: its defaults, the error a machine
// without a GPU (or a build without CUDA) gets, and the host-side chunk plan every kernel
// launch relies on. The kernels themselves are tested by tests/gpu (label gpu).
#define BOOST_TEST_MODULE cuda optimizer host
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "shardopt/device_optimizer.hpp"
#include "shardopt/error.hpp"
#ifdef SHARDOPT_HAVE_CUDA
#include "optim/cuda/chunk_plan.hpp"
#endif
#include "optim/cuda/lowbit_books.hpp"
#include "optim/cuda/lowbit_codes.hpp"


using namespace shardopt;

BOOST_AUTO_TEST_CASE(defaults_follow_torch_grad_scaler) {
    const cuda::DeviceOptimizerOptions o;
    BOOST_TEST(int(o.dtype) == int(DType::f32));
    BOOST_TEST(o.skip_nonfinite);
    BOOST_TEST(o.max_grad_norm == 0.0);
    BOOST_TEST(o.device == -1);
    BOOST_TEST(int(o.loss_scaling.mode) == int(cuda::LossScaling::automatic));
    BOOST_TEST(o.loss_scaling.init_scale == 65536.0);
    BOOST_TEST(o.loss_scaling.growth_factor == 2.0);
    BOOST_TEST(o.loss_scaling.backoff_factor == 0.5);
    BOOST_TEST(o.loss_scaling.growth_interval == 2000);
}

BOOST_AUTO_TEST_CASE(no_device_is_a_clear_unsupported_error) {
    if (cuda::device_count() > 0) {
        BOOST_TEST_MESSAGE("a CUDA device is present: the no-device error cannot be observed here");
        return;
    }
    int fake = 0; // never dereferenced: the device check comes first
    try {
        cuda::DeviceOptimizer::create({{&fake, 1}}, cuda::DeviceOptimizerOptions{});
        BOOST_FAIL("create() succeeded without a CUDA device");
    } catch (const Error &e) {
        BOOST_TEST(int(e.code()) == int(ErrorCode::unsupported));
        BOOST_TEST_MESSAGE("create() without a device: " << e.what());
        BOOST_TEST(std::string(e.what()).find("CUDA") != std::string::npos);
    }
}

#ifdef SHARDOPT_HAVE_CUDA
// Options are checked before any device is looked for, so bad ones fail the same everywhere.
BOOST_AUTO_TEST_CASE(bad_options_are_refused_before_the_device_is_needed) {
    int fake = 0;
    const std::vector<cuda::DeviceTensor> params{{&fake, 1}};
    auto expect_invalid = [&](const cuda::DeviceOptimizerOptions &o) {
        BOOST_CHECK_EXCEPTION(cuda::DeviceOptimizer::create(params, o), Error,
                              [](const Error &e) { return e.code() == ErrorCode::invalid_argument; });
    };
    cuda::DeviceOptimizerOptions o;
    o.dtype = DType::f64;
    expect_invalid(o);
    o = {};
    o.optimizer.beta1 = 1.5;
    expect_invalid(o);
    o = {};
    o.dtype = DType::f16; // dynamic scaling by default, which must skip overflowed steps
    o.skip_nonfinite = false;
    expect_invalid(o);
    o = {};
    o.loss_scaling.mode = cuda::LossScaling::dynamic;
    o.loss_scaling.backoff_factor = 1.0;
    expect_invalid(o);
    o = {};
    o.max_grad_norm = -0.5;
    expect_invalid(o);
}

// Rules and state formats without kernels yet (issue 37) are refused, before the device too.
BOOST_AUTO_TEST_CASE(rules_without_kernels_are_refused) {
    int fake = 0;
    const std::vector<cuda::DeviceTensor> params{{&fake, 1}};
    auto expect_unsupported = [&](const cuda::DeviceOptimizerOptions &o, const std::string &needle) {
        BOOST_CHECK_EXCEPTION(cuda::DeviceOptimizer::create(params, o), Error, [&](const Error &e) {
            return e.code() == ErrorCode::unsupported && std::string(e.what()).find(needle) != std::string::npos;
        });
    };
    for (OptimizerKind k : {OptimizerKind::adafactor, OptimizerKind::nadam, OptimizerKind::muon}) {
        cuda::DeviceOptimizerOptions o;
        o.optimizer = OptimizerOptions::defaults(k);
        expect_unsupported(o, optimizer_kind_name(k));
    }
    // Adamax and Adadelta have kernels: past the rule check (here they stop at the missing device).
    for (OptimizerKind k : {OptimizerKind::adamax, OptimizerKind::adadelta}) {
        cuda::DeviceOptimizerOptions o;
        o.optimizer = OptimizerOptions::defaults(k);
        try {
            cuda::DeviceOptimizer::create(params, o);
        } catch (const Error &e) {
            BOOST_TEST(std::string(e.what()).find("has no kernels") == std::string::npos, e.what());
        }
    }
}

// Low-bit state has kernels for Adam, AdamW and SGD with momentum; what the CPU rule refuses
// (amsgrad, other rules) is refused the same way, before the device.
BOOST_AUTO_TEST_CASE(lowbit_state_refuses_what_the_cpu_rule_refuses) {
    int fake = 0;
    const std::vector<cuda::DeviceTensor> params{{&fake, 1}};
    auto expect_invalid = [&](const cuda::DeviceOptimizerOptions &o, const std::string &needle) {
        BOOST_CHECK_EXCEPTION(cuda::DeviceOptimizer::create(params, o), Error, [&](const Error &e) {
            return e.code() == ErrorCode::invalid_argument && std::string(e.what()).find(needle) != std::string::npos;
        });
    };
    cuda::DeviceOptimizerOptions o;
    o.optimizer = OptimizerOptions::defaults(OptimizerKind::adam);
    o.optimizer.state_precision = StatePrecision::bits8;
    o.optimizer.amsgrad = true;
    expect_invalid(o, "amsgrad");
    o.optimizer = OptimizerOptions::defaults(OptimizerKind::lamb);
    o.optimizer.state_precision = StatePrecision::bits4;
    expect_invalid(o, "lamb");
}

// The low-bit kernels' nearest-code encoders (lowbit_codes.hpp: the cell table copied into the
// device books, the 4-bit thresholds) against the CPU's (lowbit::encode8, encode4) on every
// threshold and its neighbours, every code value, the specials (zeros, 2^-23's neighbours,
// subnormals, +-1, beyond 1, infinities, NaNs), random values and a stride through all floats.
BOOST_AUTO_TEST_CASE(lowbit_device_encoders_equal_the_cpu_encoders) {
    using namespace cuda::detail;
    const LowbitBooks books = make_lowbit_books();
    auto from_bits = [](std::uint32_t b) {
        float x;
        std::memcpy(&x, &b, 4);
        return x;
    };
    std::vector<float> xs = {0.0f, -0.0f, 1.0f, -1.0f, 2.0f, -2.0f, 1e-30f, -1e-30f, 1e30f,
                             from_bits(0x34000000u), from_bits(0x33ffffffu), from_bits(0x34000001u),
                             from_bits(0xb4000000u), from_bits(0xb3ffffffu), from_bits(1u), from_bits(0x80000001u),
                             from_bits(0x7f800000u), from_bits(0xff800000u), from_bits(0x7fc00000u),
                             from_bits(0xffc00000u), from_bits(0x7f800001u)};
    auto around = [&](float v) {
        float lo = v, hi = v;
        for (int k = 0; k < 3; ++k) {
            lo = std::nextafter(lo, -3.0f);
            hi = std::nextafter(hi, 3.0f);
            xs.push_back(lo);
            xs.push_back(hi);
        }
        xs.push_back(v);
        xs.push_back(-v);
    };
    for (const lowbit::Codebook8 *book : {&lowbit::signed8(), &lowbit::unsigned8()})
        for (int c = 0; c < 256; ++c) {
            around(book->values[c]);
            if (c < 255) around((book->values[c] + book->values[c + 1]) / 2.0f);
        }
    for (const lowbit::Codebook4 *book : {&lowbit::signed4(), &lowbit::unsigned4()}) {
        for (int c = 0; c < 16; ++c) around(book->values[c]);
        for (int i = 0; i < 15; ++i) around(book->thresholds[i]);
    }
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> unit(-1.0f, 1.0f), exponent(-12.0f, 0.5f);
    for (int i = 0; i < 100000; ++i) xs.push_back(unit(rng) * std::pow(10.0f, exponent(rng)));
    for (std::uint64_t b = 0; b < (std::uint64_t(1) << 32); b += 4099) xs.push_back(from_bits(std::uint32_t(b)));

    std::size_t wrong8[2] = {0, 0}, wrong4[2] = {0, 0};
    const lowbit::Codebook8 *eight[2] = {&lowbit::signed8(), &lowbit::unsigned8()};
    const lowbit::Codebook4 *four[2] = {&lowbit::signed4(), &lowbit::unsigned4()};
    for (float x : xs)
        for (int b = 0; b < 2; ++b) {
            const std::uint8_t got = encode8_cells(books.cells8[b], books.zero8[b], b == 0, books.negative_top8[b], x);
            if (got != lowbit::encode8(*eight[b], x) && ++wrong8[b] <= 5)
                BOOST_TEST_MESSAGE("8-bit book " << b << ": x " << x << " device " << int(got) << " cpu "
                                                 << int(lowbit::encode8(*eight[b], x)));
            wrong4[b] += encode4_search(books.thresholds4[b], x) != lowbit::encode4(*four[b], x);
        }
    BOOST_TEST(xs.size() > 1000000u);
    for (int b = 0; b < 2; ++b) {
        BOOST_TEST(wrong8[b] == 0u);
        BOOST_TEST(wrong4[b] == 0u);
    }
}

BOOST_AUTO_TEST_CASE(chunk_plan_covers_every_element_once_with_aligned_fp32_arrays) {
    using namespace cuda::detail;
    const std::vector<std::size_t> counts{1, 3, 0, 1000003, std::size_t(kChunkElements), 17};
    for (std::size_t elem : {std::size_t(4), std::size_t(2)})
        for (std::uintptr_t base : {std::uintptr_t(0x10000), std::uintptr_t(0x10000 + elem)}) {
            std::vector<std::uintptr_t> addresses;
            std::uintptr_t a = base;
            for (std::size_t c : counts) {
                addresses.push_back(a);
                a += c * elem;
            }
            const ChunkPlan plan = plan_chunks(counts, addresses, elem);
            BOOST_TEST_CONTEXT("elem " << elem << " base " << base) {
                BOOST_REQUIRE(plan.tensor_chunks.size() == counts.size());
                int64_t previous_end = 0;
                for (std::size_t t = 0; t < counts.size(); ++t) {
                    const TensorChunks range = plan.tensor_chunks[t];
                    std::size_t covered = 0;
                    for (int32_t c = range.first; c < range.first + range.count; ++c) {
                        const Chunk &chunk = plan.chunks[std::size_t(c)];
                        BOOST_TEST(chunk.tensor == int32_t(t));
                        BOOST_TEST(chunk.offset == int64_t(covered)); // consecutive, no gaps or overlaps
                        BOOST_TEST(chunk.count >= 1);
                        BOOST_TEST(chunk.count <= kChunkElements);
                        covered += std::size_t(chunk.count);
                    }
                    BOOST_TEST(covered == counts[t]);
                    // The fp32 arrays sit at the parameters' position within a 16-byte word.
                    const int64_t offset = plan.fp32_offsets[t];
                    BOOST_TEST(offset >= previous_end);
                    BOOST_TEST(offset % 4 == int64_t(addresses[t] % 16 / elem % 4));
                    previous_end = offset + int64_t(counts[t]);
                }
                BOOST_TEST(plan.fp32_elements >= previous_end);
                BOOST_TEST(plan.fp32_elements % 4 == 0); // every state slot starts 16-byte aligned
                BOOST_TEST(plan.chunks.size() == 1 + 1 + 62 + 1 + 1); // 1000003 = 61 full chunks + 1
            }
        }
}
#endif

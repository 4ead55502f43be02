// The parts of the CUDA optimizer that run on any machine: its defaults, the error a machine
// without a GPU (or a build without CUDA) gets, and the host-side chunk plan every kernel
// launch relies on. The kernels themselves are tested by tests/gpu (label gpu).
#define BOOST_TEST_MODULE cuda optimizer host
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <vector>

#include "shardopt/device_optimizer.hpp"
#include "shardopt/error.hpp"
#ifdef SHARDOPT_HAVE_CUDA
#include "optim/cuda/chunk_plan.hpp"
#endif

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
    for (OptimizerKind k : {OptimizerKind::adafactor, OptimizerKind::nadam, OptimizerKind::adamax,
                            OptimizerKind::adadelta, OptimizerKind::muon}) {
        cuda::DeviceOptimizerOptions o;
        o.optimizer = OptimizerOptions::defaults(k);
        expect_unsupported(o, optimizer_kind_name(k));
    }
    cuda::DeviceOptimizerOptions o;
    o.optimizer.state_precision = StatePrecision::bits4;
    expect_unsupported(o, "4bit");
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

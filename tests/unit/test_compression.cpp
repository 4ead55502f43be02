// Gradient compression (src/sharding/compression/): what each method puts on the wire, counted
// by the communicators; that training with it reaches the uncompressed loss (the demo MLP and a
// softmax regression on 4 ranks); that error feedback is what makes that so; and that every
// strategy runs it with replicas that stay identical and results that repeat bit for bit.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <mutex>
#include <random>
#include <vector>

#include "mlp.hpp"
#include "optim/cpu_dispatch.hpp"
#include "sharding/compression/chunk_codec.hpp"
#include "sharding/compression/power_sgd_kernels.hpp"
#include "sharding_test_support.hpp"
#include "shardopt/inprocess.hpp"
#include "shardopt/sharded_optimizer.hpp"

using namespace shardopt;
using shardopt::testing::assertion_mutex;
using shardopt::testing::expect_error;

namespace {

CompressionOptions method(GradientCompression m, double ratio = 0.01) {
    CompressionOptions c;
    c.method = m;
    c.ratio = ratio;
    c.power_sgd_min_elements = 64;
    return c;
}

// A model for optimize(): its layout, initial parameters, loss+gradient over samples, and the
// loss over the whole data set.
struct Problem {
    std::function<ParameterSet()> layout;
    std::vector<float> init;
    std::size_t samples = 0;
    ModelFunction model;
    std::function<double(const float *)> full_loss;
};

Problem demo_mlp(examples::MlpShape shape = {}) {
    Problem p;
    const auto data = std::make_shared<examples::Dataset>(examples::make_blobs(512, shape.inputs, shape.classes));
    p.layout = [shape] {
        ParameterSet layout(DType::f32);
        layout.add_matrix("fc1.weight", std::size_t(shape.hidden), std::size_t(shape.inputs));
        layout.add("fc1.bias", std::size_t(shape.hidden));
        layout.add_matrix("fc2.weight", std::size_t(shape.classes), std::size_t(shape.hidden));
        layout.add("fc2.bias", std::size_t(shape.classes));
        return layout;
    };
    p.init = examples::mlp_init<float>(shape);
    p.samples = data->size();
    p.model = [shape, data](const void *params, void *grad, const std::int64_t *samples, std::size_t n) {
        return examples::mlp_loss_grad<float>(shape, *data, static_cast<const float *>(params), static_cast<float *>(grad),
                                              samples, n);
    };
    p.full_loss = [shape, data](const float *params) {
        std::vector<float> grad(shape.parameter_count());
        std::vector<std::int64_t> all(data->size());
        for (std::size_t i = 0; i < all.size(); ++i) all[i] = std::int64_t(i);
        return examples::mlp_loss_grad<float>(shape, *data, params, grad.data(), all.data(), all.size());
    };
    return p;
}

// Softmax (multinomial logistic) regression: W [classes x features] and b, on noisy labels of a
// random linear teacher.
Problem softmax_regression() {
    constexpr int kFeatures = 64, kClasses = 8, kSamples = 1024;
    struct Data {
        std::vector<float> x;
        std::vector<int> y;
    };
    static const Data data = [] {
        Data d;
        std::mt19937 rng(5);
        std::normal_distribution<float> normal;
        std::vector<float> teacher(std::size_t(kClasses) * kFeatures);
        for (auto &t : teacher) t = normal(rng);
        for (int i = 0; i < kSamples; ++i) {
            int best = 0;
            double best_score = -1e30;
            for (int f = 0; f < kFeatures; ++f) d.x.push_back(normal(rng));
            for (int c = 0; c < kClasses; ++c) {
                double score = 4.0 * normal(rng); // label noise: the loss stays well above zero
                for (int f = 0; f < kFeatures; ++f) score += teacher[std::size_t(c) * kFeatures + f] * d.x[std::size_t(i) * kFeatures + f];
                if (score > best_score) best_score = score, best = c;
            }
            d.y.push_back(best);
        }
        return d;
    }();
    auto loss_grad = [](const float *params, float *grad, const std::int64_t *samples, std::size_t n) {
        const float *w = params, *b = params + kClasses * kFeatures;
        std::fill(grad, grad + kClasses * kFeatures + kClasses, 0.0f);
        double loss = 0.0;
        for (std::size_t s = 0; s < n; ++s) {
            const float *x = data.x.data() + std::size_t(samples[s]) * kFeatures;
            double z[kClasses], zmax = -1e30, sum = 0.0;
            for (int c = 0; c < kClasses; ++c) {
                z[c] = b[c];
                for (int f = 0; f < kFeatures; ++f) z[c] += double(w[c * kFeatures + f]) * x[f];
                zmax = std::max(zmax, z[c]);
            }
            for (double &v : z) sum += (v = std::exp(v - zmax));
            const int y = data.y[std::size_t(samples[s])];
            loss -= std::log(z[y] / sum);
            for (int c = 0; c < kClasses; ++c) {
                const double d = (z[c] / sum - (c == y ? 1.0 : 0.0)) / double(n);
                for (int f = 0; f < kFeatures; ++f) grad[c * kFeatures + f] += float(d * x[f]);
                grad[kClasses * kFeatures + c] += float(d);
            }
        }
        return loss / double(n);
    };
    Problem p;
    p.layout = [] {
        ParameterSet layout(DType::f32);
        layout.add_matrix("weight", kClasses, kFeatures);
        layout.add("bias", kClasses);
        return layout;
    };
    p.init.assign(kClasses * kFeatures + kClasses, 0.0f);
    p.samples = kSamples;
    p.model = [loss_grad](const void *params, void *grad, const std::int64_t *samples, std::size_t n) {
        return loss_grad(static_cast<const float *>(params), static_cast<float *>(grad), samples, n);
    };
    p.full_loss = [loss_grad](const float *params) {
        std::vector<float> grad(kClasses * kFeatures + kClasses);
        std::vector<std::int64_t> all(kSamples);
        for (int i = 0; i < kSamples; ++i) all[std::size_t(i)] = i;
        return loss_grad(params, grad.data(), all.data(), all.size());
    };
    return p;
}

struct Trained {
    double loss = 0.0;                 // over the whole data set, at the final parameters
    std::vector<std::vector<float>> params; // every rank's
    std::uint64_t bytes = 0;           // rank 0's, over the run
};

Trained train(const Problem &problem, int world, ShardingOptions options, int epochs = 25) {
    Trained out;
    out.params.resize(std::size_t(world));
    std::mutex mutex;
    run_inprocess(world, [&](Communicator &comm) {
        // SGD with momentum: the rule sparsified training with error feedback is made for (with
        // Adam, whose per-element scaling amplifies the delayed residuals, top-k at 1% lags).
        OptimizerOptions rule = OptimizerOptions::defaults(OptimizerKind::sgd);
        rule.lr = 0.05;
        rule.momentum = 0.9;
        auto opt = ShardedOptimizer::create(comm.shared_from_this(), problem.layout(), rule, options, problem.init.data());
        OptimizeOptions run;
        run.num_samples = std::int64_t(problem.samples);
        run.batch_size = 64;
        run.epochs = epochs;
        const std::uint64_t before = opt->bytes_sent();
        opt->optimize(problem.model, run);
        std::vector<float> params(problem.init.size());
        opt->get_parameters(params.data());
        std::lock_guard<std::mutex> lock(mutex);
        out.params[std::size_t(comm.rank())] = params;
        if (comm.rank() == 0) out.bytes = opt->bytes_sent() - before;
    });
    out.loss = problem.full_loss(out.params[0].data());
    return out;
}

ShardingOptions ddp_with(CompressionOptions c) {
    ShardingOptions o;
    o.compression = c;
    return o;
}

} // namespace

BOOST_AUTO_TEST_SUITE(codecs)

BOOST_AUTO_TEST_CASE(payloads_and_round_trips) {
    std::vector<float> x(1000);
    std::mt19937 rng(3);
    std::normal_distribution<float> normal;
    for (auto &v : x) v = normal(rng);
    std::vector<float> back(x.size());
    for (GradientCompression m : {GradientCompression::bf16, GradientCompression::fp16, GradientCompression::int8,
                                  GradientCompression::int4, GradientCompression::top_k}) {
        compression::ChunkCodec codec(method(m, 0.05), DType::f32);
        std::vector<unsigned char> payload(codec.payload_bytes(x.size()));
        codec.encode(x.data(), x.size(), payload.data());
        codec.decode(payload.data(), x.size(), back.data());
        double worst = 0.0;
        for (std::size_t i = 0; i < x.size(); ++i) worst = std::max(worst, double(std::fabs(back[i] - x[i])));
        BOOST_TEST_CONTEXT(compression_name(m)) {
            switch (m) {
            case GradientCompression::bf16: BOOST_TEST(payload.size() == 2000u); BOOST_TEST(worst < 4.0 / 256); break;
            case GradientCompression::fp16: BOOST_TEST(payload.size() == 2000u); BOOST_TEST(worst < 4.0 / 2048); break;
            case GradientCompression::int8: // 4 blocks of 256: 4 scales + 1000 bytes; error <= scale / 2
                BOOST_TEST(payload.size() == 4u * 4 + 1000);
                BOOST_TEST(worst <= 5.0 / 127 / 2 + 1e-6);
                break;
            case GradientCompression::int4: BOOST_TEST(payload.size() == 4u * 4 + 500); BOOST_TEST(worst <= 5.0 / 7 / 2 + 1e-6); break;
            default: { // exactly the 50 largest magnitudes kept, the rest zero
                BOOST_TEST(payload.size() == 50u * 8);
                std::vector<float> mags(x.size());
                for (std::size_t i = 0; i < x.size(); ++i) mags[i] = std::fabs(x[i]);
                std::sort(mags.rbegin(), mags.rend());
                std::size_t kept = 0;
                for (std::size_t i = 0; i < x.size(); ++i) {
                    if (back[i] != 0.0f) {
                        ++kept;
                        BOOST_TEST(back[i] == x[i]);
                        BOOST_TEST(std::fabs(x[i]) >= mags[49]);
                    }
                }
                BOOST_TEST(kept == 50u);
            }
            }
        }
    }
}

BOOST_AUTO_TEST_CASE(non_finite_values_survive) {
    std::vector<float> x(300, 0.5f), back(300);
    x[7] = std::numeric_limits<float>::quiet_NaN();
    for (GradientCompression m : {GradientCompression::bf16, GradientCompression::int8, GradientCompression::int4,
                                  GradientCompression::top_k}) {
        compression::ChunkCodec codec(method(m, 0.01), DType::f32);
        std::vector<unsigned char> payload(codec.payload_bytes(x.size()));
        codec.encode(x.data(), x.size(), payload.data());
        codec.decode(payload.data(), x.size(), back.data());
        bool any_nan = false;
        for (float v : back) any_nan |= std::isnan(v);
        BOOST_TEST(any_nan, compression_name(m));
    }
}

// Chunks large enough for the sampled candidate search, with ties at the cut: the kept set is
// exactly the k largest magnitudes, ties to the lower index, as a full sort says.
BOOST_AUTO_TEST_CASE(top_k_is_exact_on_large_chunks) {
    std::mt19937 rng(11);
    std::normal_distribution<float> normal;
    for (std::size_t n : {std::size_t(20000), std::size_t(100003), std::size_t(1) << 20}) {
        std::vector<float> x(n);
        for (auto &v : x) v = std::round(normal(rng) * 64.0f) / 64.0f; // coarse: many equal magnitudes
        for (double ratio : {0.001, 0.01, 0.1}) {
            compression::ChunkCodec codec(method(GradientCompression::top_k, ratio), DType::f32);
            std::vector<unsigned char> payload(codec.payload_bytes(n));
            codec.encode(x.data(), n, payload.data());
            const std::size_t k = payload.size() / 8;
            std::vector<std::uint32_t> order(n);
            for (std::uint32_t i = 0; i < n; ++i) order[i] = i;
            std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
                const float ma = std::fabs(x[a]), mb = std::fabs(x[b]);
                return ma > mb || (ma == mb && a < b);
            });
            std::vector<std::uint32_t> expected(order.begin(), order.begin() + std::ptrdiff_t(k));
            std::sort(expected.begin(), expected.end());
            std::vector<std::uint32_t> got(k);
            for (std::size_t j = 0; j < k; ++j) std::memcpy(&got[j], payload.data() + 8 * j, 4);
            BOOST_TEST(got == expected, "n " << n << ", ratio " << ratio);
        }
    }
}

// Error feedback: after encoding x + r, the residual is exactly what the payload misses.
BOOST_AUTO_TEST_CASE(feedback_keeps_what_the_payload_misses) {
    std::mt19937 rng(5);
    std::normal_distribution<float> normal;
    const std::size_t n = 70001; // blocks and vectors with tails
    std::vector<float> x(n), r(n), back(n);
    for (auto &v : x) v = normal(rng);
    for (GradientCompression m : {GradientCompression::bf16, GradientCompression::fp16, GradientCompression::int8,
                                  GradientCompression::int4, GradientCompression::top_k}) {
        for (auto &v : r) v = 0.01f * normal(rng);
        std::vector<float> c(n);
        for (std::size_t i = 0; i < n; ++i) c[i] = x[i] + r[i];
        compression::ChunkCodec codec(method(m, 0.01), DType::f32);
        std::vector<unsigned char> payload(codec.payload_bytes(n));
        codec.encode(x.data(), n, payload.data(), r.data());
        codec.decode(payload.data(), n, back.data());
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < n; ++i) wrong += r[i] != c[i] - back[i];
        BOOST_TEST(wrong == 0u, compression_name(m));
    }
}

// The AVX2 loops and the baseline ones give the same bytes and the same residuals, for odd block
// sizes (int4 bytes shared by two blocks) as well as the default.
BOOST_AUTO_TEST_CASE(vector_loops_match_the_baseline) {
    std::mt19937 rng(9);
    std::normal_distribution<double> normal;
    const std::size_t n = 50021;
    std::vector<double> x(n), r0(n);
    for (auto &v : x) v = normal(rng);
    for (auto &v : r0) v = 0.01 * normal(rng);
    for (GradientCompression m : {GradientCompression::bf16, GradientCompression::fp16, GradientCompression::int8,
                                  GradientCompression::int4, GradientCompression::top_k}) {
        for (int block : {256, 255}) {
            for (DType dtype : {DType::f32, DType::f64}) {
                CompressionOptions options = method(m, 0.01);
                options.block_size = block;
                std::vector<unsigned char> payload[2];
                std::vector<unsigned char> residual[2], decoded[2];
                for (int generic = 0; generic < 2; ++generic) {
                    optim_kernels::force_generic_kernels(generic == 1);
                    const std::size_t size = dtype_size(dtype);
                    std::vector<unsigned char> xs(n * size), rs(n * size), out(n * size);
                    for (std::size_t i = 0; i < n; ++i) {
                        if (dtype == DType::f32) {
                            const float a = float(x[i]), b = float(r0[i]);
                            std::memcpy(&xs[i * 4], &a, 4);
                            std::memcpy(&rs[i * 4], &b, 4);
                        } else {
                            std::memcpy(&xs[i * 8], &x[i], 8);
                            std::memcpy(&rs[i * 8], &r0[i], 8);
                        }
                    }
                    compression::ChunkCodec codec(options, dtype);
                    payload[generic].resize(codec.payload_bytes(n));
                    codec.encode(xs.data(), n, payload[generic].data(), rs.data());
                    codec.decode_add(payload[generic].data(), n, out.data());
                    residual[generic] = rs;
                    decoded[generic] = out;
                }
                optim_kernels::force_generic_kernels(false);
                BOOST_TEST_CONTEXT(compression_name(m) << ", block " << block << ", " << dtype_name(dtype)) {
                    BOOST_TEST((payload[0] == payload[1]));
                    BOOST_TEST((residual[0] == residual[1]));
                    BOOST_TEST((decoded[0] == decoded[1]));
                }
            }
        }
    }
}

// PowerSGD's passes: the AVX2 clones equal the baseline bit for bit, and each pass computes what
// its formula says (checked in double against a plain triple loop).
BOOST_AUTO_TEST_CASE(power_sgd_kernels_match_their_formulas) {
    namespace k = compression::power_sgd_kernels;
    const std::size_t rows = 37, cols = 53, r = 3; // vector bodies and tails
    std::mt19937 rng(13);
    std::normal_distribution<float> normal;
    std::vector<float> m0(rows * cols), res0(rows * cols), q(cols * r);
    for (auto &v : m0) v = normal(rng);
    for (auto &v : res0) v = 0.1f * normal(rng);
    for (auto &v : q) v = normal(rng);
    struct Out {
        std::vector<float> m, res, p, qb, rec, rec_res;
    } out[2];
    for (int generic = 0; generic < 2; ++generic) {
        optim_kernels::force_generic_kernels(generic == 1);
        Out &o = out[generic];
        std::vector<float> scratch(cols * (r + 1));
        o.m = m0;
        o.res = res0;
        o.p.assign(rows * r, 0.0f);
        k::project(o.m.data(), o.res.data(), rows, cols, r, q.data(), o.p.data(), scratch.data());
        o.qb.assign(cols * r, 0.0f);
        k::project_back(o.m.data(), rows, cols, r, o.p.data(), o.qb.data(), scratch.data());
        o.rec = o.m;
        o.rec_res.assign(rows * cols, 0.0f);
        k::reconstruct(o.rec.data(), o.rec_res.data(), rows, cols, r, o.p.data(), q.data(), scratch.data());
    }
    optim_kernels::force_generic_kernels(false);
    BOOST_TEST((out[0].m == out[1].m));
    BOOST_TEST((out[0].p == out[1].p));
    BOOST_TEST((out[0].qb == out[1].qb));
    BOOST_TEST((out[0].rec == out[1].rec));
    BOOST_TEST((out[0].rec_res == out[1].rec_res));
    const Out &o = out[0];
    double worst = 0.0;
    for (std::size_t i = 0; i < rows; ++i)
        for (std::size_t j = 0; j < cols; ++j) {
            BOOST_TEST(o.m[i * cols + j] == m0[i * cols + j] + res0[i * cols + j]);
            double approx = 0.0;
            for (std::size_t c = 0; c < r; ++c) approx += double(o.p[i * r + c]) * double(q[j * r + c]);
            worst = std::max(worst, std::fabs(approx - double(o.rec[i * cols + j])));
            BOOST_TEST(o.rec_res[i * cols + j] == o.m[i * cols + j] - o.rec[i * cols + j]);
        }
    for (std::size_t i = 0; i < rows; ++i)
        for (std::size_t c = 0; c < r; ++c) {
            double p = 0.0;
            for (std::size_t j = 0; j < cols; ++j) p += double(o.m[i * cols + j]) * double(q[j * r + c]);
            worst = std::max(worst, std::fabs(p - double(o.p[i * r + c])));
        }
    for (std::size_t j = 0; j < cols; ++j)
        for (std::size_t c = 0; c < r; ++c) {
            double qb = 0.0;
            for (std::size_t i = 0; i < rows; ++i) qb += double(o.m[i * cols + j]) * double(o.p[i * r + c]);
            worst = std::max(worst, std::fabs(qb - double(o.qb[j * r + c])));
        }
    BOOST_TEST(worst < 1e-3, "worst deviation from the formulas " << worst);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(wire_bytes)

// One step of DDP on 4 ranks over a 256 x 256 matrix: bytes this rank sent, per method, as the
// communicators counted them (in-process: what each rank read of the others' memory).
BOOST_AUTO_TEST_CASE(bytes_per_step_against_uncompressed) {
    auto step_bytes = [](CompressionOptions c) {
        std::uint64_t bytes = 0;
        run_inprocess(4, [&](Communicator &comm) {
            ParameterSet layout(DType::f32);
            layout.add_matrix("w", 256, 256);
            auto opt = ShardedOptimizer::create(comm.shared_from_this(), layout,
                                                OptimizerOptions::defaults(OptimizerKind::sgd), ddp_with(c));
            opt->zero_grad();
            auto *g = static_cast<float *>(opt->grad(0));
            for (int i = 0; i < 65536; ++i) g[i] = std::sin(float(i * (comm.rank() + 1)));
            const StepResult r = opt->step();
            if (comm.rank() == 0) bytes = r.bytes_sent;
        });
        return double(bytes);
    };
    const double base = step_bytes(CompressionOptions{});
    BOOST_TEST(base >= 2.0 * 3 / 4 * 65536 * 4); // a ring's worth at least
    const double bf16 = step_bytes(method(GradientCompression::bf16)) / base;
    const double int8 = step_bytes(method(GradientCompression::int8)) / base;
    const double int4 = step_bytes(method(GradientCompression::int4)) / base;
    const double topk = step_bytes(method(GradientCompression::top_k, 0.01)) / base;
    CompressionOptions psgd = method(GradientCompression::power_sgd);
    const double power = step_bytes(psgd) / base;
    BOOST_TEST_MESSAGE("bytes vs uncompressed: bf16 " << bf16 << ", int8 " << int8 << ", int4 " << int4 << ", top_k(0.01) "
                                                      << topk << ", power_sgd(4) " << power);
    BOOST_TEST(std::fabs(bf16 - 0.5) < 0.01);
    BOOST_TEST(int8 <= 0.27);
    BOOST_TEST(int8 >= 0.25); // one byte per element plus the scales: the counts are real
    BOOST_TEST(int4 <= 0.14);
    BOOST_TEST(topk <= 0.03);
    const double formula = (256.0 + 256.0) * 4 / 65536; // (rows + cols) x rank of rows x cols
    BOOST_TEST(std::fabs(power - formula) < 0.002, "power_sgd " << power << " vs formula " << formula);
}

BOOST_AUTO_TEST_CASE(memory_stats_count_the_residuals) {
    run_inprocess(4, [&](Communicator &comm) {
        ParameterSet layout(DType::f32);
        layout.add("w", 1000);
        auto opt = ShardedOptimizer::create(comm.shared_from_this(), layout, OptimizerOptions::defaults(OptimizerKind::sgd),
                                            ddp_with(method(GradientCompression::int8)));
        opt->zero_grad();
        opt->step();
        // Residual of the whole bucket + the owner's residual of its chunk + one chunk of sum
        // scratch, and the payload buffers (p payloads out, p in) of the one bucket.
        const std::size_t padded = 1000, chunk = 250, payload = 4 + 250;
        const std::size_t expected = (padded + chunk + chunk) * 4 + 2 * 4 * payload;
        std::lock_guard<std::mutex> lock(assertion_mutex());
        BOOST_TEST(opt->memory_stats().compression_bytes == expected);
    });
    run_inprocess(2, [&](Communicator &comm) {
        ParameterSet layout(DType::f32);
        layout.add("w", 1000);
        auto opt = ShardedOptimizer::create(comm.shared_from_this(), layout, OptimizerOptions::defaults(OptimizerKind::sgd),
                                            ShardingOptions{});
        std::lock_guard<std::mutex> lock(assertion_mutex());
        BOOST_TEST(opt->memory_stats().compression_bytes == 0u);
    });
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(accuracy)

// 4 ranks, the same step count: each method's final loss within 2% (bf16, int8) or 5% (top-k at
// ratio 0.01, PowerSGD rank 4) of uncompressed training's.
BOOST_AUTO_TEST_CASE(reaches_the_uncompressed_loss) {
    for (const auto &[name, problem] : {std::pair{"demo MLP", demo_mlp()}, std::pair{"softmax regression", softmax_regression()}}) {
        const int epochs = 25; // 200 steps (MLP) and 400 (regression)
        const double base = train(problem, 4, ShardingOptions{}, epochs).loss;
        struct Expect {
            CompressionOptions c;
            double tolerance;
        };
        for (const Expect &e : {Expect{method(GradientCompression::bf16), 0.02}, Expect{method(GradientCompression::int8), 0.02},
                                Expect{method(GradientCompression::top_k, 0.1), 0.05}, Expect{method(GradientCompression::top_k, 0.01), 0.05},
                                Expect{method(GradientCompression::power_sgd), 0.05}}) {
            const double loss = train(problem, 4, ddp_with(e.c), epochs).loss;
            BOOST_TEST_MESSAGE(name << ": " << compression_name(e.c.method)
                                    << (e.c.method == GradientCompression::top_k ? "(" + std::to_string(e.c.ratio) + ")" : "")
                                    << " final loss " << loss << " vs uncompressed "
                                    << base << " (" << (loss / base - 1.0) * 100 << "%)");
            BOOST_TEST(loss <= base * (1.0 + e.tolerance), name << " " << compression_name(e.c.method) << ": " << loss
                                                                  << " vs " << base);
        }
    }
}

// Without error feedback, top-k drops 99% of every gradient for good: the loss shows it.
BOOST_AUTO_TEST_CASE(error_feedback_is_what_converges) {
    const Problem problem = softmax_regression();
    CompressionOptions with = method(GradientCompression::top_k, 0.01), without = with;
    without.error_feedback = false;
    const double base = train(problem, 4, ShardingOptions{}).loss;
    const double ef = train(problem, 4, ddp_with(with)).loss;
    const double no_ef = train(problem, 4, ddp_with(without)).loss;
    BOOST_TEST_MESSAGE("top_k(0.01): uncompressed " << base << ", with error feedback " << ef << ", without " << no_ef);
    BOOST_TEST(no_ef > ef * 1.10, "without error feedback " << no_ef << " vs with " << ef);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(strategies)

// Every strategy that reduces gradients (and LocalSGD's averaging) trains compressed, its
// replicas identical, fewer bytes moved than uncompressed, and a second run repeats bit for bit.
BOOST_AUTO_TEST_CASE(every_strategy_compressed) {
    const Problem problem = demo_mlp({32, 64, 4}); // matrices big enough for PowerSGD to save bytes
    for (Strategy s : {Strategy::ddp, Strategy::zero1, Strategy::zero2, Strategy::fsdp, Strategy::hybrid, Strategy::local_sgd}) {
        for (GradientCompression m : {GradientCompression::int8, GradientCompression::top_k, GradientCompression::power_sgd}) {
            ShardingOptions o;
            o.strategy = s;
            o.local_sgd_period = 2;
            o.hybrid_data_strategy = Strategy::zero2;
            o.data_parallel_size = 2; // hybrid: 2 x 2 (dp x tp)
            o.tensor_parallel_size = s == Strategy::hybrid ? 2 : 1;
            ShardingOptions plain = o;
            o.compression = method(m, 0.05);
            BOOST_TEST_CONTEXT(strategy_name(s) << " " << compression_name(m)) {
                const Trained a = train(problem, 4, o, 4), b = train(problem, 4, o, 4);
                const Trained u = train(problem, 4, plain, 4);
                BOOST_TEST(a.params[0] == b.params[0]); // reproducible
                for (int r = 1; r < 4; ++r) BOOST_TEST(a.params[std::size_t(r)] == a.params[0]);
                BOOST_TEST(a.loss < problem.full_loss(problem.init.data()) * 0.9);
                BOOST_TEST(a.bytes < u.bytes, a.bytes << " vs uncompressed " << u.bytes);
            }
        }
    }
}

// Checkpoints hold each rank's residuals (and LocalSGD's last averaged parameters): a run saved
// at step 4 and resumed ends bit for bit where the uninterrupted run ends, in both forms
// (LocalSGD: sharded only; the consolidated form holds one replica's optimizer state, with or
// without compression).
// Each rank's residuals are the last segment of its shard file: a flipped byte there is found
// by the load's checksums on every rank, and the optimizer keeps what it had.
BOOST_AUTO_TEST_CASE(corrupt_residuals_are_refused) {
    const Problem problem = demo_mlp();
    const auto dir = std::filesystem::temp_directory_path() / ("shardopt_compression_bad_" + std::to_string(::getpid()));
    ShardingOptions o;
    o.compression = method(GradientCompression::int8);
    std::vector<int> refused(2, 0), unchanged(2, 0);
    run_inprocess(2, [&](Communicator &comm) {
        auto opt = ShardedOptimizer::create(comm.shared_from_this(), problem.layout(),
                                            OptimizerOptions::defaults(OptimizerKind::adam), o, problem.init.data());
        std::vector<float> before(problem.init.size()), after(problem.init.size());
        opt->zero_grad();
        for (int t = 0; t < opt->layout().tensor_count(); ++t)
            std::fill_n(static_cast<float *>(opt->grad(t)), opt->layout().tensor(t).count, 0.25f * float(comm.rank() + 1));
        opt->step();
        opt->save(dir.string());
        comm.barrier();
        if (comm.rank() == 0)
            for (const auto &entry : std::filesystem::directory_iterator(dir)) {
                if (entry.path().filename() == "checkpoint.shardopt") continue;
                std::fstream f(entry.path(), std::ios::in | std::ios::out | std::ios::binary);
                const auto size = std::filesystem::file_size(entry.path());
                f.seekg(std::streamoff(size - 5));
                char c = 0;
                f.read(&c, 1);
                c = char(c ^ 0x10);
                f.seekp(std::streamoff(size - 5));
                f.write(&c, 1);
            }
        comm.barrier();
        opt->get_parameters(before.data());
        try {
            opt->load(dir.string());
        } catch (const Error &e) {
            refused[std::size_t(comm.rank())] = e.code() == ErrorCode::corrupt;
        }
        opt->get_parameters(after.data());
        unchanged[std::size_t(comm.rank())] = before == after;
    });
    std::filesystem::remove_all(dir);
    BOOST_TEST((refused == std::vector<int>{1, 1}));
    BOOST_TEST((unchanged == std::vector<int>{1, 1}));
}

BOOST_AUTO_TEST_CASE(resume_is_exact) {
    const Problem problem = demo_mlp();
    const auto dir = std::filesystem::temp_directory_path() / ("shardopt_compression_ckpt_" + std::to_string(::getpid()));
    for (Strategy s : {Strategy::ddp, Strategy::zero2, Strategy::local_sgd})
        for (GradientCompression m : {GradientCompression::int8, GradientCompression::top_k, GradientCompression::power_sgd})
            for (bool consolidated : {false, true}) {
                if (consolidated && s == Strategy::local_sgd) continue;
                ShardingOptions o;
                o.strategy = s;
                o.local_sgd_period = 2;
                o.compression = method(m, 0.05);
                std::vector<std::vector<float>> straight(3), resumed(3);
                std::vector<unsigned char> bytes;
                run_inprocess(3, [&](Communicator &comm) {
                    auto make = [&] {
                        return ShardedOptimizer::create(comm.shared_from_this(), problem.layout(),
                                                        OptimizerOptions::defaults(OptimizerKind::adam), o, problem.init.data());
                    };
                    std::vector<float> params(problem.init.size()), grad(params.size());
                    auto steps = [&](ShardedOptimizer &opt, int from, int to) {
                        for (int k = from; k < to; ++k) {
                            opt.get_parameters(params.data());
                            const std::int64_t samples[4] = {4 * comm.rank() + k, 4 * comm.rank() + 1 + k, 50 + k, 90 + comm.rank()};
                            problem.model(params.data(), grad.data(), samples, 4);
                            opt.zero_grad();
                            std::size_t at = 0;
                            for (int t = 0; t < opt.layout().tensor_count(); ++t) {
                                const std::size_t n = opt.layout().tensor(t).count;
                                std::memcpy(opt.grad(t), grad.data() + at, n * sizeof(float));
                                at += n;
                            }
                            opt.step();
                        }
                    };
                    auto a = make();
                    steps(*a, 0, 4);
                    if (consolidated) {
                        auto b = a->serialize();
                        if (comm.rank() == 0) bytes = b;
                    } else {
                        a->save(dir.string());
                    }
                    steps(*a, 4, 8);
                    a->get_parameters(params.data());
                    straight[std::size_t(comm.rank())] = params;
                    auto r = make();
                    if (consolidated) r->deserialize(bytes);
                    else r->load(dir.string());
                    steps(*r, 4, 8);
                    r->get_parameters(params.data());
                    resumed[std::size_t(comm.rank())] = params;
                });
                BOOST_TEST_CONTEXT(strategy_name(s) << " " << compression_name(m) << (consolidated ? " serialized" : " saved")) {
                    for (int r = 0; r < 3; ++r) BOOST_TEST(resumed[std::size_t(r)] == straight[std::size_t(r)]);
                }
            }
    std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(refusals) {
    run_inprocess(2, [&](Communicator &comm) {
        ParameterSet layout(DType::f32);
        layout.add("w", 100);
        ShardingOptions o = ddp_with(method(GradientCompression::top_k, 0.0));
        expect_error(ErrorCode::invalid_argument, "compression.ratio", [&] {
            ShardedOptimizer::create(comm.shared_from_this(), layout, OptimizerOptions::defaults(OptimizerKind::sgd), o);
        });
        o.compression = method(GradientCompression(42));
        expect_error(ErrorCode::invalid_argument, "compression.method", [&] {
            ShardedOptimizer::create(comm.shared_from_this(), layout, OptimizerOptions::defaults(OptimizerKind::sgd), o);
        });
    });
    // Ranks that disagree on the method fail together, naming it.
    run_inprocess(2, [&](Communicator &comm) {
        ParameterSet layout(DType::f32);
        layout.add("w", 100);
        ShardingOptions o = ddp_with(method(comm.rank() == 0 ? GradientCompression::int8 : GradientCompression::bf16));
        expect_error(ErrorCode::mismatch, "compression.method", [&] {
            ShardedOptimizer::create(comm.shared_from_this(), layout, OptimizerOptions::defaults(OptimizerKind::sgd), o);
        });
    });
}

BOOST_AUTO_TEST_SUITE_END()

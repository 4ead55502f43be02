// Low-bit optimizer state (src/optim/lowbit.hpp, lowbit_rules.cpp): the codebooks' nearest-code
// search against brute force, the rules' batched encoders against it, and the rules' results
// independent of how a tensor is cut: slices that each hold their own codes and combine the maxima
// of the blocks they share give the very bits of one whole slice, in the baseline and the AVX2
// loops, threaded or not.
#define BOOST_TEST_MODULE lowbit
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "../../src/optim/cpu_dispatch.hpp"
#include "../../src/optim/lowbit.hpp"
#include "../../src/optim/parallel_update.hpp"
#include "shardopt/optim.hpp"

using namespace shardopt;
namespace bdata = boost::unit_test::data;

namespace {

// The nearest code by brute force: the lowest code of least distance.
std::uint8_t nearest(const float *values, int n, float x) {
    int best = 0;
    for (int c = 1; c < n; ++c)
        if (std::fabs(values[c] - x) < std::fabs(values[best] - x)) best = c;
    return std::uint8_t(best);
}

// One "rank": the slice [offset, offset + count) of a tensor of `total` elements, with its own
// low-bit codes and scales (or full-precision state for a small tensor).
template <typename T> struct Slice {
    std::size_t offset = 0, count = 0;
    std::vector<std::vector<std::uint8_t>> codes;
    std::vector<std::vector<float>> scales;
    std::vector<std::vector<T>> state;
};

// Parameters of one tensor updated as slices cut at `cuts`, the way the engine does it: phase 1
// on every slice into shared statistics (maxima), then apply.
template <typename T> class LowBitTrainer {
  public:
    LowBitTrainer(const OptimizerOptions &options, std::size_t total, const std::vector<std::size_t> &cuts,
                  const std::vector<double> &initial)
        : optimizer_(Optimizer::create(options)), params_(initial.begin(), initial.end()), total_(total) {
        shape_.count = total;
        block_ = optimizer_->lowbit_block();
        quantized_ = optimizer_->quantized(0, shape_);
        std::vector<std::size_t> points = cuts;
        if (quantized_) shared_ = lowbit::shared_blocks(block_, points);
        shape_.shared_blocks = shared_.size();
        points.push_back(0);
        points.push_back(total);
        std::sort(points.begin(), points.end());
        points.erase(std::unique(points.begin(), points.end()), points.end());
        const StatePrecision p = options.state_precision;
        for (std::size_t i = 0; i + 1 < points.size(); ++i) {
            Slice<T> s;
            s.offset = points[i];
            s.count = points[i + 1] - points[i];
            for (int k = 0; k < optimizer_->state_slots(); ++k) {
                if (quantized_) {
                    s.codes.emplace_back(lowbit::code_bytes(p, s.offset, s.count), std::uint8_t(0));
                    s.scales.emplace_back(lowbit::blocks_touched(p, s.offset, s.count), 0.0f);
                } else {
                    s.state.emplace_back(s.count, T(0));
                }
            }
            slices_.push_back(std::move(s));
        }
    }

    void step(std::int64_t step, const std::vector<T> &grad, ParallelUpdate *threads = nullptr) {
        std::vector<double> stats(optimizer_->phase_stats(0, shape_), 0.0);
        std::vector<Segment<T>> segs;
        for (auto &s : slices_) segs.push_back(segment(s, grad));
        if (optimizer_->has_first_phase())
            for (const auto &seg : segs) optimizer_->begin_step(seg, step, stats.data());
        if (threads) {
            threads->apply(*optimizer_, segs, step, stats.data());
            return;
        }
        for (const auto &seg : segs) optimizer_->apply(seg, step, stats.data());
    }

    const std::vector<T> &params() const { return params_; }
    // Slot k decoded, element by element, over the whole tensor.
    std::vector<T> state(int k) const {
        std::vector<T> out(total_);
        for (const auto &s : slices_)
            for (std::size_t i = 0; i < s.count; ++i) {
                if (!quantized_) {
                    out[s.offset + i] = s.state[std::size_t(k)][i];
                    continue;
                }
                const std::size_t code = s.offset % block_ + i;
                const std::uint8_t *c = s.codes[std::size_t(k)].data();
                const bool four = optimizer_->options().state_precision == StatePrecision::bits4;
                const unsigned q = four ? (c[code >> 1] >> ((code & 1) * 4)) & 15 : c[code];
                const float *values = four ? (k == 0 ? lowbit::signed4().values : lowbit::unsigned4().values)
                                           : (k == 0 ? lowbit::signed8().values : lowbit::unsigned8().values);
                out[s.offset + i] = T(values[q]) * T(s.scales[std::size_t(k)][code / block_]);
            }
        return out;
    }
    bool quantized() const { return quantized_; }

  private:
    Segment<T> segment(Slice<T> &s, const std::vector<T> &grad) {
        Segment<T> seg;
        seg.param = params_.data() + s.offset;
        seg.grad = grad.data() + s.offset;
        seg.count = s.count;
        seg.offset = s.offset;
        seg.shape = shape_;
        for (int k = 0; k < optimizer_->state_slots(); ++k) {
            if (quantized_) {
                seg.lowbit[k].codes = s.codes[std::size_t(k)].data();
                seg.lowbit[k].scales = s.scales[std::size_t(k)].data();
            } else {
                seg.state[k] = s.state[std::size_t(k)].data();
            }
        }
        const auto ends = lowbit::shared_ends(block_, shared_, s.offset, s.count, total_);
        seg.shared_first = ends.first;
        seg.shared_last = ends.last;
        return seg;
    }

    std::unique_ptr<Optimizer> optimizer_;
    std::vector<T> params_;
    std::size_t total_, block_ = 0;
    TensorShape shape_;
    bool quantized_ = false;
    std::vector<std::size_t> shared_;
    std::vector<Slice<T>> slices_;
};

template <typename T> bool same_bits(const std::vector<T> &a, const std::vector<T> &b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

struct Variant {
    const char *name;
    OptimizerKind kind;
    StatePrecision precision;
    double momentum, weight_decay;
    bool nesterov;
};

std::vector<Variant> variants() {
    return {{"adam8", OptimizerKind::adam, StatePrecision::bits8, 0.0, 0.0, false},
            {"adam4_l2", OptimizerKind::adam, StatePrecision::bits4, 0.0, 0.01, false},
            {"adamw8", OptimizerKind::adamw, StatePrecision::bits8, 0.0, 0.1, false},
            {"adamw4", OptimizerKind::adamw, StatePrecision::bits4, 0.0, 0.1, false},
            {"sgd8_momentum", OptimizerKind::sgd, StatePrecision::bits8, 0.9, 0.0, false},
            {"sgd4_nesterov", OptimizerKind::sgd, StatePrecision::bits4, 0.9, 0.01, true}};
}

std::vector<const char *> variant_names() {
    std::vector<const char *> names;
    for (const auto &v : variants()) names.push_back(v.name);
    return names;
}

OptimizerOptions options_of(const std::string &name) {
    for (const auto &v : variants())
        if (name == v.name) {
            OptimizerOptions o = OptimizerOptions::defaults(v.kind);
            o.lr = v.kind == OptimizerKind::sgd ? 0.05 : 0.01;
            o.momentum = v.momentum;
            o.weight_decay = v.weight_decay;
            o.nesterov = v.nesterov;
            o.state_precision = v.precision;
            return o;
        }
    throw std::logic_error("no variant " + name);
}

// Values over many magnitudes, so every decade of the dynamic map is used.
std::vector<double> spread_values(std::mt19937 &rng, std::size_t n) {
    std::uniform_real_distribution<double> unit(-1.0, 1.0), exponent(-6.0, 0.5);
    std::vector<double> v(n);
    for (double &x : v) x = unit(rng) * std::pow(10.0, exponent(rng));
    return v;
}

// Runs steps on a whole tensor and on the same tensor cut at `cuts`; everything must be equal.
template <typename T>
void check_cuts(const std::string &name, std::size_t total, const std::vector<std::size_t> &cuts,
                bool threaded_cut = false) {
    const OptimizerOptions o = options_of(name);
    std::mt19937 rng(7);
    const std::vector<double> initial = spread_values(rng, total);
    LowBitTrainer<T> whole(o, total, {}, initial), cut(o, total, cuts, initial);
    ParallelUpdate threads(3);
    for (std::int64_t step = 1; step <= 6; ++step) {
        const std::vector<double> g = spread_values(rng, total);
        const std::vector<T> grad(g.begin(), g.end());
        whole.step(step, grad);
        cut.step(step, grad, threaded_cut ? &threads : nullptr);
    }
    BOOST_TEST(whole.quantized() == (total >= lowbit::kMinElements));
    BOOST_TEST(same_bits(whole.params(), cut.params()), name << " params");
    for (int k = 0; k < (o.kind == OptimizerKind::sgd ? 1 : 2); ++k)
        BOOST_TEST(same_bits(whole.state(k), cut.state(k)), name << " state " << k);
}

} // namespace

BOOST_AUTO_TEST_SUITE(codebooks)

BOOST_AUTO_TEST_CASE(eight_bit_codes_are_the_nearest) {
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> unit(-1.0f, 1.0f), exponent(-9.0f, 0.2f);
    std::vector<float> xs = {0.0f, -0.0f, 1.0f, -1.0f, 1.0000001f, -1.0000001f, 1e-30f, 2.0f};
    for (int i = 0; i < 200000; ++i) xs.push_back(unit(rng) * std::pow(10.0f, exponent(rng)));
    for (const auto *book : {&lowbit::signed8(), &lowbit::unsigned8()})
        for (int c = 0; c + 1 < 256; ++c) { // every threshold and its neighbours
            const float t = (book->values[c] + book->values[c + 1]) / 2.0f;
            xs.push_back(t);
            xs.push_back(std::nextafter(t, 2.0f));
            xs.push_back(std::nextafter(t, -2.0f));
            xs.push_back(-t);
        }
    int wrong = 0;
    for (const auto *book : {&lowbit::signed8(), &lowbit::unsigned8()})
        for (float x : xs) {
            if (!book->is_signed && x < 0) continue;
            const float clamped = std::max(-1.0f, std::min(1.0f, x));
            const std::uint8_t code = lowbit::encode8(*book, x);
            const std::uint8_t best = nearest(book->values, 256, clamped);
            // A tie (up to the rounding of the midpoint and of the distances: a few ulps of x) may
            // take either neighbour; anything else must be the nearest.
            const float gap = std::fabs(book->values[code] - clamped) - std::fabs(book->values[best] - clamped);
            if (code != best && gap > 4 * std::numeric_limits<float>::epsilon() * std::fabs(clamped)) {
                if (++wrong < 8)
                    BOOST_TEST_MESSAGE("x " << x << " code " << int(code) << " " << book->values[code] << " best "
                                            << int(best) << " " << book->values[best]);
            }
        }
    BOOST_TEST(wrong == 0);
}

BOOST_AUTO_TEST_CASE(four_bit_codes_are_the_nearest) {
    std::mt19937 rng(2);
    std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
    for (const auto *book : {&lowbit::signed4(), &lowbit::unsigned4()})
        for (int i = 0; i < 100000; ++i) {
            float x = unit(rng);
            if (book == &lowbit::unsigned4()) x = std::fabs(x);
            const std::uint8_t code = lowbit::encode4(*book, x);
            const std::uint8_t best = nearest(book->values, 16, x);
            BOOST_TEST_REQUIRE(std::fabs(book->values[code] - x) == std::fabs(book->values[best] - x));
        }
}

BOOST_AUTO_TEST_CASE(maps_are_bitsandbytes_and_torchao_reaching_minus_one) {
    BOOST_TEST(lowbit::signed8().values[127] == 0.0f);
    BOOST_TEST(lowbit::signed8().values[255] == 1.0f);
    // 10^-6 times the midpoints of torch.linspace(0.1, 1, n) in float32 (5.5e-7 rounded up).
    BOOST_TEST(std::fabs(lowbit::signed8().values[128] - 5.5e-7f) < 1e-13f);
    BOOST_TEST(lowbit::unsigned8().values[0] == 0.0f);
    BOOST_TEST(std::fabs(lowbit::unsigned8().values[1] - 3.25e-7f) < 1e-13f);
    BOOST_TEST(lowbit::signed4().values[7] == 0.0f);
    BOOST_TEST(lowbit::signed4().values[14] == 0.8875f);
    // the signed maps reach -1 as they reach +1 (the libraries' stop at -0.993 and -0.8875)
    BOOST_TEST(lowbit::signed8().values[0] == -1.0f);
    BOOST_TEST(lowbit::signed8().values[1] == -lowbit::signed8().values[253]);
    BOOST_TEST(lowbit::signed4().values[0] == -1.0f);
    BOOST_TEST(lowbit::signed4().values[1] == -lowbit::signed4().values[13]);
    BOOST_TEST(lowbit::unsigned4().values[0] == 0.0625f); // linspace(0, 1, 17)[1:]: no zero
    BOOST_TEST(lowbit::unsigned4().values[15] == 1.0f);
}

// A checkpoint holds the state as values (code value times scale) and a load encodes them again:
// that must give back the same codes and scales, whatever the sign of a block's largest element
// (the signed maps reach -1 as well as +1, so the largest magnitude decodes exactly either way).
BOOST_AUTO_TEST_CASE(decoded_state_encodes_back_to_the_same_codes_and_scales) {
    std::mt19937 rng(4);
    std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
    for (StatePrecision p : {StatePrecision::bits8, StatePrecision::bits4})
        for (bool is_signed : {true, false}) {
            const std::size_t count = 5 * lowbit::block_elements(p) + 37, blocks = lowbit::blocks_touched(p, 0, count);
            std::vector<float> values(count);
            for (std::size_t i = 0; i < count; ++i) {
                const std::size_t b = i / lowbit::block_elements(p);
                const float v = unit(rng) * std::pow(10.0f, -float(b)); // blocks of different scales
                // odd blocks' largest element negative (signed), even ones' positive
                values[i] = is_signed ? (b % 2 ? -std::fabs(v) : std::fabs(v)) * (i % 5 == 0 ? 1.0f : 0.5f) : std::fabs(v);
            }
            std::vector<std::uint8_t> codes(lowbit::code_bytes(p, 0, count)), again(codes.size());
            std::vector<float> scales(blocks), scales_again(blocks), decoded(count);
            const LowBitArray first{codes.data(), scales.data()}, second{again.data(), scales_again.data()};
            lowbit::encode_slice(first, p, is_signed, 0, count, values.data());
            lowbit::decode_slice(first, p, is_signed, 0, count, decoded.data());
            lowbit::encode_slice(second, p, is_signed, 0, count, decoded.data());
            const std::string name = std::string(state_precision_name(p)) + (is_signed ? " signed" : " unsigned");
            BOOST_TEST(std::memcmp(scales.data(), scales_again.data(), blocks * sizeof(float)) == 0, name << ": scales");
            BOOST_TEST(codes == again, name << ": codes");
        }
}

BOOST_AUTO_TEST_CASE(shared_blocks_follow_the_cuts) {
    const auto shared = lowbit::shared_blocks(256, {300, 512, 700, 100});
    BOOST_TEST((shared == std::vector<std::size_t>{0, 1, 2})); // 512 is a block boundary
    const auto ends = lowbit::shared_ends(256, shared, 300, 400, 5000); // [300, 700): blocks 1 and 2, both partial
    BOOST_TEST(ends.first == 1u);
    BOOST_TEST(ends.last == 2u);
    const auto whole = lowbit::shared_ends(256, shared, 0, 5000, 5000);
    BOOST_TEST(whole.first == Segment<float>::npos);
    BOOST_TEST(whole.last == Segment<float>::npos);
    BOOST_TEST(lowbit::code_bytes(StatePrecision::bits4, 300, 401) == (300 % 128 + 401 + 1) / 2);
    BOOST_TEST(lowbit::blocks_touched(StatePrecision::bits8, 300, 400) == 2u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(rules)

// Sizes not a multiple of the block; cuts inside blocks, at block boundaries, two in one block.
BOOST_DATA_TEST_CASE(f32_cut_equals_whole, bdata::make(variant_names()), name) {
    check_cuts<float>(name, 10007, {1, 255, 300, 310, 4096, 5000, 9999});
}

BOOST_DATA_TEST_CASE(f64_cut_equals_whole, bdata::make(variant_names()), name) {
    check_cuts<double>(name, 6001, {129, 2000, 2001});
}

BOOST_DATA_TEST_CASE(threaded_cut_equals_whole, bdata::make(variant_names()), name) {
    check_cuts<float>(name, 300007, {77777, 150000});
}

BOOST_DATA_TEST_CASE(small_tensors_keep_full_state, bdata::make(variant_names()), name) {
    check_cuts<float>(name, 4095, {100, 2000});
}

BOOST_DATA_TEST_CASE(avx2_equals_baseline, bdata::make(variant_names()), name) {
    const OptimizerOptions o = options_of(name);
    std::mt19937 rng(11);
    const std::size_t total = 20011;
    const std::vector<double> initial = spread_values(rng, total);
    LowBitTrainer<float> a(o, total, {333}, initial), b(o, total, {333}, initial);
    for (std::int64_t step = 1; step <= 4; ++step) {
        const std::vector<double> g = spread_values(rng, total);
        const std::vector<float> grad(g.begin(), g.end());
        optim_kernels::force_generic_kernels(true);
        a.step(step, grad);
        optim_kernels::force_generic_kernels(false);
        b.step(step, grad);
    }
    BOOST_TEST(same_bits(a.params(), b.params()));
    BOOST_TEST(same_bits(a.state(0), b.state(0)));
}

// The decoded state stays close to the full-precision moments (relative to each block's
// maximum: 8-bit within 1/30 of it at worst, 4-bit within 1/6), and the parameters follow Adam.
BOOST_AUTO_TEST_CASE(state_tracks_full_precision_adam) {
    for (StatePrecision p : {StatePrecision::bits8, StatePrecision::bits4}) {
        OptimizerOptions o = OptimizerOptions::defaults(OptimizerKind::adam);
        o.lr = 1e-3;
        std::mt19937 rng(5);
        const std::size_t total = 8192;
        const std::vector<double> initial = spread_values(rng, total);
        LowBitTrainer<double> full(o, total, {}, initial);
        o.state_precision = p;
        LowBitTrainer<double> low(o, total, {}, initial);
        std::normal_distribution<double> normal;
        for (std::int64_t step = 1; step <= 20; ++step) {
            std::vector<double> g(total);
            for (double &x : g) x = normal(rng);
            full.step(step, g);
            low.step(step, g);
        }
        double worst = 0.0;
        for (std::size_t i = 0; i < total; ++i)
            worst = std::max(worst, std::fabs(full.params()[i] - low.params()[i]));
        BOOST_TEST_MESSAGE(state_precision_name(p) << ": largest parameter difference after 20 steps " << worst);
        BOOST_TEST(worst < 20 * o.lr); // each step moves a parameter by about lr at most
    }
}

// The rule's own batched encoders (lowbit_rules.cpp) against lowbit::encode8 / encode4: after one
// Adam step from zero state the moments are (1 - beta1) g and (1 - beta2) g g exactly, so every
// block's scale and every code follow from the gradient alone; the decoded state must be those
// codes' values times those scales, bit for bit (signed and unsigned maps, both precisions).
BOOST_AUTO_TEST_CASE(first_step_codes_are_the_encoders) {
    for (StatePrecision p : {StatePrecision::bits8, StatePrecision::bits4}) {
        OptimizerOptions o = OptimizerOptions::defaults(OptimizerKind::adam);
        o.state_precision = p;
        std::mt19937 rng(11);
        const std::size_t total = 8192 + 77; // the last block cut short
        const std::vector<double> initial = spread_values(rng, total), g = spread_values(rng, total);
        const std::vector<float> grad(g.begin(), g.end());
        LowBitTrainer<float> trainer(o, total, {}, initial);
        trainer.step(1, grad);
        const std::size_t block = lowbit::block_elements(p);
        const float one_minus[2] = {float(1.0 - o.beta1), float(1.0 - o.beta2)};
        for (int k = 0; k < 2; ++k) {
            std::vector<float> moment(total);
            for (std::size_t i = 0; i < total; ++i)
                moment[i] = k == 0 ? one_minus[0] * grad[i] : one_minus[1] * grad[i] * grad[i];
            const std::vector<float> got = trainer.state(k);
            std::size_t wrong = 0, negative = 0;
            for (std::size_t first = 0; first < total; first += block) {
                const std::size_t n = std::min(block, total - first);
                std::uint32_t top = 0;
                for (std::size_t j = 0; j < n; ++j) top = std::max(top, lowbit::float_bits(moment[first + j]) & 0x7fffffffu);
                float scale;
                std::memcpy(&scale, &top, sizeof scale);
                const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
                for (std::size_t j = 0; j < n; ++j) {
                    const float y = moment[first + j] * inv;
                    negative += y < 0.0f;
                    const float value = p == StatePrecision::bits8
                                            ? (k == 0 ? lowbit::signed8() : lowbit::unsigned8())
                                                  .values[lowbit::encode8(k == 0 ? lowbit::signed8() : lowbit::unsigned8(), y)]
                                            : (k == 0 ? lowbit::signed4() : lowbit::unsigned4())
                                                  .values[lowbit::encode4(k == 0 ? lowbit::signed4() : lowbit::unsigned4(), y)];
                    const float want = value * scale;
                    wrong += std::memcmp(&want, &got[first + j], sizeof want) != 0;
                }
            }
            BOOST_TEST(wrong == 0u, state_precision_name(p) << " slot " << k);
            if (k == 0) BOOST_TEST(negative > total / 4, "the signed map's negative half is used");
        }
    }
}

BOOST_AUTO_TEST_SUITE_END()

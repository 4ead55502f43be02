// Adam, AdamW and SGD with momentum over low-bit state (lowbit.hpp). Tensors under
// lowbit::kMinElements keep full-precision state and are updated by the plain rules (adam.cpp,
// sgd.cpp), so they are bit for bit what Adam and SGD do.
//
// A quantized slice is updated block by block: the block's codes are decoded (code value times
// the block's scale), the moments advanced and the parameters moved with the new moments in full
// precision, exactly the element arithmetic of adam.cpp / sgd.cpp; then the new moments' absolute
// maximum becomes the block's scale and each moment is encoded as its nearest code. A block that
// other ranks also hold part of (Segment::shared_first / shared_last) takes the maximum over all
// of its parts: begin_step adds this slice's part into the step's statistics (phase_op max), the
// engine combines them across ranks, apply uses the combined value.
//
// The loops are compiled twice, baseline x86-64 and AVX2 (cpu_dispatch.hpp), doing the same
// IEEE operations per element (no FMA: -ffp-contract=off), so both give the same bits.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

#include "cpu_dispatch.hpp"
#include "kernel_support.hpp"
#include "lowbit.hpp"
#include "rules.hpp"

namespace shardopt {
namespace {

using optim_kernels::check_segment;
using optim_kernels::gradient_sign;
using optim_kernels::with_flags;
using lowbit::Codebook4;
using lowbit::Codebook8;

constexpr std::size_t kMaxBlock = lowbit::kBlock8;
constexpr std::size_t npos = Segment<float>::npos;

// --- codes ----------------------------------------------------------------------------------------
// One quantized slot of a slice: its arrays and codebook.
struct Slot {
    std::uint8_t *codes;
    float *scales;
    const Codebook8 *book8; // 8-bit, else book4
    const Codebook4 *book4;
};

// Table lookups stay scalar loops: on x86 a vectorized one becomes an emulated gather (lane
// inserts), slower than plain loads. They are the same integer loads in every variant.
#define SHARDOPT_SCALAR_LOOKUP __attribute__((noinline, optimize("no-tree-vectorize")))

// out[k] = values[codes[k]] for 8-bit codes.
SHARDOPT_SCALAR_LOOKUP void lookup_values(const float *__restrict values, const std::uint8_t *__restrict codes,
                                          std::size_t n, float *__restrict out) {
    for (std::size_t k = 0; k < n; ++k) out[k] = values[codes[k]];
}

// out[2j], out[2j + 1] = the values of byte j's two 4-bit codes.
SHARDOPT_SCALAR_LOOKUP void lookup_pairs(const float (*__restrict pairs)[2], const std::uint8_t *__restrict codes,
                                         std::size_t bytes, float *__restrict out) {
    for (std::size_t j = 0; j < bytes; ++j) {
        out[2 * j] = pairs[codes[j]][0];
        out[2 * j + 1] = pairs[codes[j]][1];
    }
}

// entries[k] = cells[keys[k]].
SHARDOPT_SCALAR_LOOKUP void lookup_cells(const std::uint32_t *__restrict cells, const std::uint32_t *__restrict keys,
                                         std::size_t n, std::uint32_t *__restrict entries) {
    for (std::size_t k = 0; k < n; ++k) entries[k] = cells[keys[k]];
}

// out[k] = value of code number s + k.
[[gnu::always_inline]] inline void decode(const Slot &q, std::size_t s, std::size_t n, float *__restrict out) {
    const std::uint8_t *__restrict codes = q.codes;
    if (q.book8) return lookup_values(q.book8->values, codes + s, n, out);
    const float *__restrict values = q.book4->values;
    std::size_t k = 0;
    if (s & 1) {
        out[0] = values[codes[s >> 1] >> 4];
        k = 1;
    }
    const std::size_t whole = (n - k) / 2;
    lookup_pairs(q.book4->pairs, codes + ((s + k) >> 1), whole, out + k);
    if (k + 2 * whole < n) out[n - 1] = values[codes[((s + k) >> 1) + whole] & 15];
}

// Codes of a run of values already divided by the block's scale (y[k] = x[k] * inv).
template <bool Signed>
[[gnu::always_inline]] inline void encode8(const Codebook8 &book, const float *__restrict y, std::size_t n,
                                          std::uint8_t *__restrict out) {
    alignas(64) std::uint32_t keys[kMaxBlock], entries[kMaxBlock];
    for (std::size_t k = 0; k < n; ++k) {
        keys[k] = lowbit::cell_key(lowbit::float_bits(y[k]) & 0x7fffffffu);
    }
    lookup_cells(book.cells, keys, n, entries);
    const std::uint32_t zero = book.zero, negative_top = book.negative_top;
    for (std::size_t k = 0; k < n; ++k) {
        const std::uint32_t bits = lowbit::float_bits(y[k]);
        const std::uint32_t magnitude = bits & 0x7fffffffu;
        std::uint32_t code = lowbit::cell_code(entries[k], magnitude, zero);
        if constexpr (Signed) {
            // negative_top read once above, and the negative code computed for every value, then
            // selected: read through the codebook reference (7% of the step in perf), or with the call
            // inside the select (the step 6% slower), the loop ran a branch per element here
            const std::uint32_t negative = lowbit::negative_code(code, magnitude, negative_top);
            code = (bits >> 31) ? negative : code;
        }
        out[k] = std::uint8_t(code);
    }
}

// 4-bit codes: the number of thresholds below each value, threshold by threshold.
[[gnu::always_inline]] inline void encode4(const Codebook4 &book, const float *__restrict y, std::size_t n,
                                          std::uint8_t *__restrict out) {
    for (std::size_t k = 0; k < n; ++k) out[k] = 0;
    for (int i = 0; i < 15; ++i) {
        const float t = book.thresholds[i];
        for (std::size_t k = 0; k < n; ++k) out[k] = std::uint8_t(out[k] + (y[k] > t ? 1 : 0));
    }
}

// Codes s .. s + n of x[k] * inv (the nearest code of x / scale).
template <typename T>
[[gnu::always_inline]] inline void encode(const Slot &q, std::size_t s, std::size_t n, const T *__restrict x, float inv) {
    alignas(64) float y[kMaxBlock];
    for (std::size_t k = 0; k < n; ++k) y[k] = float(x[k]) * inv;
    std::uint8_t *__restrict codes = q.codes;
    if (q.book8) {
        if (q.book8->is_signed) encode8<true>(*q.book8, y, n, codes + s);
        else encode8<false>(*q.book8, y, n, codes + s);
        return;
    }
    alignas(64) std::uint8_t c[kMaxBlock];
    encode4(*q.book4, y, n, c);
    std::size_t k = 0;
    if (s & 1) { // the high nibble of the first byte
        codes[s >> 1] = std::uint8_t((codes[s >> 1] & 0x0f) | c[0] << 4);
        k = 1;
    }
    std::uint8_t *__restrict pairs = codes + ((s + k) >> 1);
    const std::size_t whole = (n - k) / 2;
    for (std::size_t j = 0; j < whole; ++j) pairs[j] = std::uint8_t(c[k + 2 * j] | c[k + 2 * j + 1] << 4);
    if (k + 2 * whole < n) pairs[whole] = std::uint8_t((pairs[whole] & 0xf0) | c[n - 1]);
}

// The largest |x|: on the bits of |x|, which order as the magnitudes do (exact, so the same in
// every variant; a NaN counts as the largest).
[[gnu::always_inline]] inline float abs_max(const float *__restrict x, std::size_t n) {
    std::uint32_t top = 0;
    for (std::size_t k = 0; k < n; ++k) {
        const std::uint32_t a = lowbit::float_bits(x[k]) & 0x7fffffffu;
        top = a > top ? a : top;
    }
    float r;
    std::memcpy(&r, &top, sizeof r);
    return r;
}
[[gnu::always_inline]] inline double abs_max(const double *__restrict x, std::size_t n) {
    std::uint64_t top = 0;
    for (std::size_t k = 0; k < n; ++k) {
        std::uint64_t a;
        std::memcpy(&a, &x[k], sizeof a);
        a &= 0x7fffffffffffffffull;
        top = a > top ? a : top;
    }
    double r;
    std::memcpy(&r, &top, sizeof r);
    return r;
}

// --- Adam / AdamW ----------------------------------------------------------------------------------
template <typename T> struct AdamScalars {
    T sign, weight_decay, decay_factor, one_minus_beta1, beta2, one_minus_beta2;
    T step_size, inv_bias_correction2_sqrt, eps;
};

// Adam's element arithmetic over one block's run, from the decoded moments (adam.cpp's, except
// that the bias correction of v multiplies by its reciprocal: one division less, which the FP
// divider of the cores this runs on needs); the new moments go to m_new / v_new, the parameters
// are moved when Write.
template <typename T, class L2, class Decoupled, class Write>
[[gnu::always_inline]] inline void adam_run(T *__restrict param, const T *__restrict grad, std::size_t n,
                                            const float *__restrict m_code, const float *__restrict v_code,
                                            T m_scale, T v_scale, const AdamScalars<T> &k, T *__restrict m_new,
                                            T *__restrict v_new) {
    for (std::size_t i = 0; i < n; ++i) {
        T p = param[i];
        if constexpr (Decoupled::value) p *= k.decay_factor;
        T g = k.sign * grad[i];
        if constexpr (L2::value) g += k.weight_decay * p;
        const T m_old = T(m_code[i]) * m_scale;
        const T v_old = T(v_code[i]) * v_scale;
        const T m_i = m_old + k.one_minus_beta1 * (g - m_old);
        const T v_i = v_old * k.beta2 + k.one_minus_beta2 * g * g;
        m_new[i] = m_i;
        v_new[i] = v_i;
        if constexpr (Write::value) {
            const T denom = std::sqrt(v_i) * k.inv_bias_correction2_sqrt + k.eps;
            param[i] = p - k.step_size * m_i / denom;
        }
    }
}

// --- SGD with momentum -----------------------------------------------------------------------------
template <typename T> struct SgdScalars {
    T sign, lr, weight_decay, momentum, one_minus_dampening;
};

template <typename T, class Decay, class FirstStep, class Nesterov, class Write>
[[gnu::always_inline]] inline void sgd_run(T *__restrict param, const T *__restrict grad, std::size_t n,
                                           const float *__restrict b_code, T b_scale, const SgdScalars<T> &k,
                                           T *__restrict b_new) {
    for (std::size_t i = 0; i < n; ++i) {
        T g = k.sign * grad[i];
        if constexpr (Decay::value) g += k.weight_decay * param[i];
        T b;
        if constexpr (FirstStep::value)
            b = g;
        else
            b = (T(b_code[i]) * b_scale) * k.momentum + k.one_minus_dampening * g;
        b_new[i] = b;
        if constexpr (Write::value) {
            T direction;
            if constexpr (Nesterov::value)
                direction = g + k.momentum * b;
            else
                direction = b;
            param[i] -= k.lr * direction;
        }
    }
}

// --- the block loop, shared by both rules ------------------------------------------------------------
// A slice's blocks: for each, the run of elements [first, first + n) it holds, the run's first
// code, and where the block's combined maximum is in the statistics (npos: not shared).
struct BlockRun {
    std::size_t first, n, block, code, shared;
};

template <typename T> struct BlockWalk {
    BlockWalk(const Segment<T> &seg, std::size_t block_elements)
        : seg_(seg), block_(block_elements), head_(seg.offset % block_elements),
          blocks_(seg.count == 0 ? 0 : (head_ + seg.count + block_elements - 1) / block_elements) {}
    std::size_t blocks() const { return blocks_; }
    [[gnu::always_inline]] BlockRun run(std::size_t b) const {
        const std::size_t code = b == 0 ? head_ : b * block_;
        const std::size_t first = code - head_;
        const std::size_t n = std::min(seg_.count - first, (b + 1) * block_ - code);
        std::size_t shared = npos;
        if (b == 0 && seg_.shared_first != npos) shared = seg_.shared_first;
        else if (b + 1 == blocks_ && seg_.shared_last != npos) shared = seg_.shared_last;
        return {first, n, b, code, shared};
    }

  private:
    const Segment<T> &seg_;
    std::size_t block_, head_, blocks_;
};

// After the rule advanced one block's run into fresh: phase 1 (Write false) adds its maximum to
// the statistics; phase 2 takes the block's maximum (combined across ranks when shared) as the
// new scale and encodes the run.
template <typename T, bool Write>
[[gnu::always_inline]] inline void finish_block(const Slot &slot, const BlockRun &r, const T *__restrict fresh,
                                                std::size_t stat_at, double *stats, const double *combined) {
    T top = abs_max(fresh, r.n);
    if constexpr (!Write) {
        stats[stat_at] = std::max(stats[stat_at], double(top));
    } else {
        if (stat_at != npos) top = std::max(top, T(combined[stat_at]));
        const float scale = float(top);
        const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
        encode(slot, r.code, r.n, fresh, inv);
        slot.scales[r.block] = scale;
    }
}

template <typename T, class L2, class Decoupled, class Write>
[[gnu::always_inline]] inline void adam_blocks(const Segment<T> &seg, const Slot (&slots)[2], const AdamScalars<T> &k,
                                               std::size_t block, double *stats, const double *combined) {
    alignas(64) float m_code[kMaxBlock], v_code[kMaxBlock];
    alignas(64) T m_new[kMaxBlock], v_new[kMaxBlock];
    const BlockWalk<T> walk(seg, block);
    for (std::size_t b = 0; b < walk.blocks(); ++b) {
        const BlockRun r = walk.run(b);
        if (!Write::value && r.shared == npos) continue; // phase 1: only the shared blocks
        decode(slots[0], r.code, r.n, m_code);
        decode(slots[1], r.code, r.n, v_code);
        adam_run<T, L2, Decoupled, Write>(seg.param + r.first, seg.grad + r.first, r.n, m_code, v_code,
                                          T(slots[0].scales[b]), T(slots[1].scales[b]), k, m_new, v_new);
        const std::size_t at = r.shared == npos ? npos : seg.stats[0] + r.shared * 2;
        finish_block<T, Write::value>(slots[0], r, m_new, at, stats, combined);
        finish_block<T, Write::value>(slots[1], r, v_new, at == npos ? npos : at + 1, stats, combined);
    }
}

template <typename T, class Decay, class FirstStep, class Nesterov, class Write>
[[gnu::always_inline]] inline void sgd_blocks(const Segment<T> &seg, const Slot (&slots)[1], const SgdScalars<T> &k,
                                              std::size_t block, double *stats, const double *combined) {
    alignas(64) float b_code[kMaxBlock];
    alignas(64) T b_new[kMaxBlock];
    const BlockWalk<T> walk(seg, block);
    for (std::size_t b = 0; b < walk.blocks(); ++b) {
        const BlockRun r = walk.run(b);
        if (!Write::value && r.shared == npos) continue;
        decode(slots[0], r.code, r.n, b_code);
        sgd_run<T, Decay, FirstStep, Nesterov, Write>(seg.param + r.first, seg.grad + r.first, r.n, b_code,
                                                      T(slots[0].scales[b]), k, b_new);
        finish_block<T, Write::value>(slots[0], r, b_new, r.shared == npos ? npos : seg.stats[0] + r.shared, stats,
                                      combined);
    }
}

template <typename T> void check_lowbit(const Segment<T> &seg, int slots) {
    for (int k = 0; k < slots; ++k)
        require(seg.lowbit[k].codes != nullptr && seg.lowbit[k].scales != nullptr, ErrorCode::invalid_argument,
                "low-bit segment: state slot " + std::to_string(k) + " has no codes or scales");
}

Slot slot_of(const LowBitArray &a, StatePrecision p, bool is_signed) {
    if (p == StatePrecision::bits8) return {a.codes, a.scales, is_signed ? &lowbit::signed8() : &lowbit::unsigned8(), nullptr};
    return {a.codes, a.scales, nullptr, is_signed ? &lowbit::signed4() : &lowbit::unsigned4()};
}

class LowBitRule : public Optimizer {
  public:
    LowBitRule(const OptimizerOptions &options, std::unique_ptr<Optimizer> full)
        : Optimizer(options), full_(std::move(full)), block_(lowbit::block_elements(options.state_precision)) {}

    int state_slots() const override { return full_->state_slots(); }
    bool quantized(int slot, const TensorShape &shape) const override {
        return slot >= 0 && slot < state_slots() && lowbit::quantizes(options_.state_precision, shape.count);
    }
    int stat_phases() const override { return 1; }
    std::size_t phase_stats(int, const TensorShape &shape) const override {
        return lowbit::quantizes(options_.state_precision, shape.count) ? shape.shared_blocks * std::size_t(state_slots())
                                                                        : 0;
    }
    ReduceOp phase_op(int) const override { return ReduceOp::max; }

    void begin_step(const Segment<float> &seg, int64_t step, double *stats) const override { first(seg, step, stats); }
    void begin_step(const Segment<double> &seg, int64_t step, double *stats) const override { first(seg, step, stats); }
    void apply(const Segment<float> &seg, int64_t step, const double *stats) const override { second(seg, step, stats); }
    void apply(const Segment<double> &seg, int64_t step, const double *stats) const override { second(seg, step, stats); }

  protected:
    void lr_changed() override { full_->set_lr(options_.lr); }

    template <typename T> void first(const Segment<T> &seg, int64_t step, double *stats) const {
        require(step >= 1, ErrorCode::invalid_argument, "step must be >= 1 (steps count from 1)");
        if (seg.count == 0 || seg.lowbit[0].codes == nullptr) return; // full precision: nothing shared
        if (seg.shared_first == npos && seg.shared_last == npos) return;
        require(stats != nullptr, ErrorCode::invalid_argument, "low-bit state with shared blocks needs statistics");
        check_lowbit(seg, state_slots());
        run(seg, step, stats, nullptr, false);
    }

    template <typename T> void second(const Segment<T> &seg, int64_t step, const double *stats) const {
        if (seg.count > 0 && seg.lowbit[0].codes == nullptr) return full_->apply(seg, step, stats);
        require(step >= 1, ErrorCode::invalid_argument, "step must be >= 1 (steps count from 1)");
        if (seg.count == 0) return;
        require(seg.param != nullptr && seg.grad != nullptr, ErrorCode::invalid_argument,
                "segment param and grad must not be null");
        check_lowbit(seg, state_slots());
        require((seg.shared_first == npos && seg.shared_last == npos) || stats != nullptr, ErrorCode::invalid_argument,
                "low-bit state with shared blocks needs statistics");
        run(seg, step, nullptr, stats, true);
    }

    virtual void run(const Segment<float> &seg, int64_t step, double *stats, const double *combined, bool write) const = 0;
    virtual void run(const Segment<double> &seg, int64_t step, double *stats, const double *combined,
                     bool write) const = 0;

    std::unique_ptr<Optimizer> full_; // the same rule with full-precision state: small tensors
    std::size_t block_;
};

class LowBitAdam final : public LowBitRule {
  public:
    explicit LowBitAdam(const OptimizerOptions &options) : LowBitRule(options, make_adam(full_options(options))) {}

  private:
    static OptimizerOptions full_options(OptimizerOptions o) {
        o.state_precision = StatePrecision::full;
        return o;
    }
    void run(const Segment<float> &seg, int64_t step, double *stats, const double *combined, bool write) const override {
        pass(seg, step, stats, combined, write);
    }
    void run(const Segment<double> &seg, int64_t step, double *stats, const double *combined, bool write) const override {
        pass(seg, step, stats, combined, write);
    }

    template <typename T> void pass(const Segment<T> &seg, int64_t step, double *stats, const double *combined, bool write) const {
        const OptimizerOptions &o = options_;
        const double t = double(step);
        const AdamScalars<T> k{T(gradient_sign(o)), T(o.weight_decay), T(1.0 - o.lr * o.weight_decay), T(1.0 - o.beta1),
                               T(o.beta2), T(1.0 - o.beta2), T(o.lr / (1.0 - std::pow(o.beta1, t))),
                               T(1.0 / std::sqrt(1.0 - std::pow(o.beta2, t))), T(o.eps)};
        const Slot slots[2] = {slot_of(seg.lowbit[0], o.state_precision, true),
                               slot_of(seg.lowbit[1], o.state_precision, false)};
        const bool decoupled = o.kind == OptimizerKind::adamw, decay = o.weight_decay != 0.0;
        with_flags([&](auto l2, auto dec, auto wr) { blocks(seg, slots, k, stats, combined, l2, dec, wr); },
                   decay && !decoupled, decay && decoupled, write);
    }

    template <typename T, class L2, class Dec, class Wr>
    static void blocks_loop(const Segment<T> &seg, const Slot (&slots)[2], const AdamScalars<T> &k, std::size_t block,
                            double *stats, const double *combined) {
        adam_blocks<T, L2, Dec, Wr>(seg, slots, k, block, stats, combined);
    }
#if defined(__x86_64__) && defined(__GNUC__)
    template <typename T, class L2, class Dec, class Wr>
    __attribute__((target("avx2"))) static void blocks_avx2(const Segment<T> &seg, const Slot (&slots)[2],
                                                            const AdamScalars<T> &k, std::size_t block, double *stats,
                                                            const double *combined) {
        adam_blocks<T, L2, Dec, Wr>(seg, slots, k, block, stats, combined);
    }
#endif
    template <typename T, class L2, class Dec, class Wr>
    void blocks(const Segment<T> &seg, const Slot (&slots)[2], const AdamScalars<T> &k, double *stats,
                const double *combined, L2, Dec, Wr) const {
#if defined(__x86_64__) && defined(__GNUC__)
        if (optim_kernels::use_avx2()) return blocks_avx2<T, L2, Dec, Wr>(seg, slots, k, block_, stats, combined);
#endif
        blocks_loop<T, L2, Dec, Wr>(seg, slots, k, block_, stats, combined);
    }
};

class LowBitSgd final : public LowBitRule {
  public:
    explicit LowBitSgd(const OptimizerOptions &options) : LowBitRule(options, make_sgd(full_options(options))) {}

  private:
    static OptimizerOptions full_options(OptimizerOptions o) {
        o.state_precision = StatePrecision::full;
        return o;
    }
    void run(const Segment<float> &seg, int64_t step, double *stats, const double *combined, bool write) const override {
        pass(seg, step, stats, combined, write);
    }
    void run(const Segment<double> &seg, int64_t step, double *stats, const double *combined, bool write) const override {
        pass(seg, step, stats, combined, write);
    }

    template <typename T> void pass(const Segment<T> &seg, int64_t step, double *stats, const double *combined, bool write) const {
        const OptimizerOptions &o = options_;
        const SgdScalars<T> k{T(gradient_sign(o)), T(o.lr), T(o.weight_decay), T(o.momentum), T(1.0 - o.dampening)};
        const Slot slots[1] = {slot_of(seg.lowbit[0], o.state_precision, true)};
        with_flags([&](auto d, auto first, auto nes, auto wr) { blocks(seg, slots, k, stats, combined, d, first, nes, wr); },
                   o.weight_decay != 0.0, step == 1, o.nesterov, write);
    }

    template <typename T, class D, class F, class N, class Wr>
    static void blocks_loop(const Segment<T> &seg, const Slot (&slots)[1], const SgdScalars<T> &k, std::size_t block,
                            double *stats, const double *combined) {
        sgd_blocks<T, D, F, N, Wr>(seg, slots, k, block, stats, combined);
    }
#if defined(__x86_64__) && defined(__GNUC__)
    template <typename T, class D, class F, class N, class Wr>
    __attribute__((target("avx2"))) static void blocks_avx2(const Segment<T> &seg, const Slot (&slots)[1],
                                                            const SgdScalars<T> &k, std::size_t block, double *stats,
                                                            const double *combined) {
        sgd_blocks<T, D, F, N, Wr>(seg, slots, k, block, stats, combined);
    }
#endif
    template <typename T, class D, class F, class N, class Wr>
    void blocks(const Segment<T> &seg, const Slot (&slots)[1], const SgdScalars<T> &k, double *stats,
                const double *combined, D, F, N, Wr) const {
#if defined(__x86_64__) && defined(__GNUC__)
        if (optim_kernels::use_avx2()) return blocks_avx2<T, D, F, N, Wr>(seg, slots, k, block_, stats, combined);
#endif
        blocks_loop<T, D, F, N, Wr>(seg, slots, k, block_, stats, combined);
    }
};

} // namespace

std::unique_ptr<Optimizer> make_lowbit(const OptimizerOptions &options) {
    if (options.kind == OptimizerKind::sgd) return std::make_unique<LowBitSgd>(options);
    return std::make_unique<LowBitAdam>(options);
}

} // namespace shardopt

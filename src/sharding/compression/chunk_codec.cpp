#include "chunk_codec.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "optim/cpu_dispatch.hpp"
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif
#include "shardopt/error.hpp"
#include "shardopt/half.hpp"

namespace shardopt::compression {
namespace {

std::size_t blocks_of(std::size_t count, std::size_t block) { return (count + block - 1) / block; }

// The bits of |v| as an unsigned integer: ordered as the magnitudes are, with every NaN above
// infinity, so integer max and compare (which vectorize without fast-math) rank magnitudes.
template <typename T> using MagnitudeKey = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
template <typename T> MagnitudeKey<T> magnitude_key(T v) {
    MagnitudeKey<T> bits;
    std::memcpy(&bits, &v, sizeof(T));
    return bits & (std::numeric_limits<MagnitudeKey<T>>::max() >> 1);
}
template <typename T> constexpr MagnitudeKey<T> infinity_key() {
    return sizeof(T) == 4 ? MagnitudeKey<T>(0x7f800000u) : MagnitudeKey<T>(0x7ff0000000000000ull);
}
template <typename T> T from_key(MagnitudeKey<T> key) {
    T v;
    std::memcpy(&v, &key, sizeof(T));
    return v;
}

// --- element loops: each compiled for baseline x86-64 and for AVX2 (dispatch below); both do
// the same IEEE operations per element, so results are bitwise the same either way. Always
// inlined: a loop compiled once on its own would run the baseline code in both. ---

// One block of blockwise quantization: c = x (+ residual), scale = absmax(c) / levels (NaN when
// the block holds a non-finite value, so it decodes to NaN and the step is skipped),
// v = round-to-nearest-even(c * (levels / absmax)) in [-levels, levels]; the residual keeps
// c - scale * v. `c` is scratch of n elements.
template <typename T, int Levels, bool Feedback>
[[gnu::always_inline]] inline void quantize_block(const T *__restrict x, T *__restrict residual, std::size_t n,
                                                  unsigned char *__restrict scale_out, std::int8_t *__restrict v,
                                                  T *__restrict c) {
    using Key = MagnitudeKey<T>;
    Key max_key = 0;
    for (std::size_t i = 0; i < n; ++i) {
        c[i] = Feedback ? T(x[i] + residual[i]) : x[i];
        const Key key = magnitude_key(c[i]);
        max_key = key > max_key ? key : max_key; // by value: std::max's references keep loops scalar
    }
    if (max_key >= infinity_key<T>()) { // decodes to NaN: every value 0, the residual keeps c
        const float nan = std::numeric_limits<float>::quiet_NaN();
        std::memcpy(scale_out, &nan, 4);
        for (std::size_t i = 0; i < n; ++i) {
            v[i] = 0;
            if constexpr (Feedback) residual[i] = c[i];
        }
        return;
    }
    const T absmax = from_key<T>(max_key);
    const float scale = float(absmax / T(Levels));
    std::memcpy(scale_out, &scale, 4);
    const T inverse = absmax > T(0) ? T(Levels) / absmax : T(0);
    const T scale_t = T(scale);
    for (std::size_t i = 0; i < n; ++i) {
        T rounded = std::nearbyint(c[i] * inverse);
        rounded = rounded < T(-Levels) ? T(-Levels) : rounded;
        rounded = rounded > T(Levels) ? T(Levels) : rounded;
        v[i] = static_cast<std::int8_t>(int(rounded));
        if constexpr (Feedback) residual[i] = T(c[i] - scale_t * rounded);
    }
}

// int4: values of one block (starting at element `first`) into nibbles, q + 8, low nibble first.
[[gnu::always_inline]] inline void pack_nibbles(const std::int8_t *__restrict v, std::size_t n, std::size_t first,
                                                unsigned char *__restrict q) {
    std::size_t i = 0;
    if (first % 2 == 0) { // whole bytes: this block's alone
        unsigned char *__restrict bytes = q + first / 2;
        for (std::size_t j = 0; j < n / 2; ++j)
            bytes[j] = static_cast<unsigned char>((v[2 * j] + 8) | ((v[2 * j + 1] + 8) << 4));
        i = n - n % 2;
    }
    for (; i < n; ++i) // a byte shared with a neighbouring block (odd block sizes); q starts zeroed
        q[(first + i) / 2] |= static_cast<unsigned char>((v[i] + 8) << (((first + i) & 1) * 4));
}

template <typename T, bool Four, bool Feedback>
[[gnu::always_inline]] inline void quantize_chunk(const T *x, T *residual, std::size_t count, std::size_t block,
                                                  unsigned char *out) {
    constexpr int levels = Four ? 7 : 127;
    constexpr std::size_t kScratch = 1024;
    const std::size_t nblocks = blocks_of(count, block);
    unsigned char *q = out + nblocks * 4;
    if (Four) std::memset(q, 0, (count + 1) / 2);
    T scratch[kScratch];
    std::int8_t values[kScratch];
    std::vector<T> big;
    std::vector<std::int8_t> big_values;
    if (block > kScratch) {
        big.resize(block);
        big_values.resize(block);
    }
    T *c = block > kScratch ? big.data() : scratch;
    std::int8_t *v4 = block > kScratch ? big_values.data() : values;
    for (std::size_t b = 0; b < nblocks; ++b) {
        const std::size_t begin = b * block, n = std::min(block, count - begin);
        T *res = Feedback ? residual + begin : nullptr;
        std::int8_t *v = Four ? v4 : reinterpret_cast<std::int8_t *>(q + begin);
        quantize_block<T, levels, Feedback>(x + begin, res, n, out + 4 * b, v, c);
        if constexpr (Four) pack_nibbles(v, n, begin, q);
    }
}

template <typename T, bool Four, bool Add>
[[gnu::always_inline]] inline void dequantize_chunk(const unsigned char *payload, std::size_t count, std::size_t block, T *__restrict out) {
    const std::size_t nblocks = blocks_of(count, block);
    const unsigned char *__restrict q = payload + nblocks * 4;
    for (std::size_t b = 0; b < nblocks; ++b) {
        float scale_f;
        std::memcpy(&scale_f, payload + 4 * b, 4);
        const T scale = T(scale_f);
        const std::size_t begin = b * block, end = std::min(count, begin + block);
        std::size_t i = begin;
        if (Four && begin % 2 == 0) { // whole bytes: two values each
            const unsigned char *__restrict bytes = q + begin / 2;
            T *__restrict o = out + begin;
            for (std::size_t j = 0; j < (end - begin) / 2; ++j) {
                const T lo = scale * T(int(bytes[j] & 0xf) - 8), hi = scale * T(int(bytes[j] >> 4) - 8);
                o[2 * j] = Add ? T(o[2 * j] + lo) : lo;
                o[2 * j + 1] = Add ? T(o[2 * j + 1] + hi) : hi;
            }
            i = end - (end - begin) % 2;
        }
        for (; i < end; ++i) {
            const int v = Four ? int((q[i / 2] >> ((i & 1) * 4)) & 0xf) - 8 : int(static_cast<std::int8_t>(q[i]));
            const T value = scale * T(v); // exact product of a float and a small integer, rounded once
            out[i] = Add ? T(out[i] + value) : value;
        }
    }
}

// bf16::from_float without its branch (same bits), so the loops vectorize.
[[gnu::always_inline]] inline std::uint16_t bf16_bits(float f) {
    const std::uint32_t u = detail::float_bits(f);
    const std::uint32_t nan = (u >> 16) | 0x40u;
    const std::uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    return std::uint16_t((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

template <bool Brain> [[gnu::always_inline]] inline std::uint16_t half_bits(float f) {
    return Brain ? bf16_bits(f) : f16::from_float(f);
}
template <bool Brain> [[gnu::always_inline]] inline float half_value(std::uint16_t bits) {
    return Brain ? detail::bits_float(std::uint32_t(bits) << 16) : detail::bits_float(f16::to_float_bits(bits));
}

template <typename T, bool Feedback, bool Brain>
[[gnu::always_inline]] inline void half_encode_as(const T *__restrict x, T *__restrict residual, std::size_t count,
                                                  std::uint16_t *__restrict out) {
    for (std::size_t i = 0; i < count; ++i) {
        const T c = Feedback ? T(x[i] + residual[i]) : x[i];
        const std::uint16_t bits = half_bits<Brain>(float(c));
        out[i] = bits;
        if constexpr (Feedback) residual[i] = T(c - T(half_value<Brain>(bits)));
    }
}
template <typename T, bool Feedback>
[[gnu::always_inline]] inline void half_encode(const T *x, T *residual, std::size_t count, bool brain, std::uint16_t *out) {
    if (brain) half_encode_as<T, Feedback, true>(x, residual, count, out);
    else half_encode_as<T, Feedback, false>(x, residual, count, out);
}

template <typename T, bool Add, bool Brain>
[[gnu::always_inline]] inline void half_decode_as(const std::uint16_t *__restrict in, std::size_t count, T *__restrict out) {
    for (std::size_t i = 0; i < count; ++i) {
        const float v = half_value<Brain>(in[i]);
        out[i] = Add ? T(out[i] + T(v)) : T(v);
    }
}
template <typename T, bool Add>
[[gnu::always_inline]] inline void half_decode(const std::uint16_t *in, std::size_t count, bool brain, T *out) {
    if (brain) half_decode_as<T, Add, true>(in, count, out);
    else half_decode_as<T, Add, false>(in, count, out);
}

// top_k's candidates: the elements of c = x (+ residual, which then becomes c) whose magnitude
// key reaches `floor`, in index order; returns how many. `out` has room for count.
template <typename T> struct Ranked {
    MagnitudeKey<T> key;
    std::uint32_t index;
    // Selection order: larger magnitude first, then lower index.
    bool operator<(const Ranked &o) const { return key > o.key || (key == o.key && index < o.index); }
};

template <typename T, bool Feedback>
[[gnu::always_inline]] inline std::size_t collect_from(const T *__restrict x, T *__restrict residual, std::size_t begin,
                                                       std::size_t count, MagnitudeKey<T> floor, Ranked<T> *__restrict out,
                                                       std::size_t found) {
    for (std::size_t i = begin; i < count; ++i) { // branch-free: written always, kept when it qualifies
        const T c = Feedback ? T(x[i] + residual[i]) : x[i];
        if constexpr (Feedback) residual[i] = c;
        const MagnitudeKey<T> key = magnitude_key(c);
        out[found] = {key, std::uint32_t(i)};
        found += key >= floor;
    }
    return found;
}

// Every loop above, once per instruction set.
struct Loops {
    template <typename T, bool Four, bool Feedback>
    static void quantize(const T *x, T *r, std::size_t n, std::size_t block, unsigned char *out) {
        quantize_chunk<T, Four, Feedback>(x, r, n, block, out);
    }
    template <typename T, bool Four, bool Add>
    static void dequantize(const unsigned char *p, std::size_t n, std::size_t block, T *out) {
        dequantize_chunk<T, Four, Add>(p, n, block, out);
    }
    template <typename T, bool Feedback>
    static void half_enc(const T *x, T *r, std::size_t n, bool brain, std::uint16_t *out) {
        half_encode<T, Feedback>(x, r, n, brain, out);
    }
    template <typename T, bool Add> static void half_dec(const std::uint16_t *in, std::size_t n, bool brain, T *out) {
        half_decode<T, Add>(in, n, brain, out);
    }
    template <typename T, bool Feedback>
    static std::size_t collect(const T *x, T *r, std::size_t n, MagnitudeKey<T> floor, Ranked<T> *out) {
        return collect_from<T, Feedback>(x, r, 0, n, floor, out, 0);
    }
};
#if defined(__x86_64__) && defined(__GNUC__)
struct LoopsAvx2 {
    template <typename T, bool Four, bool Feedback>
    __attribute__((target("avx2"))) static void quantize(const T *x, T *r, std::size_t n, std::size_t block,
                                                         unsigned char *out) {
        quantize_chunk<T, Four, Feedback>(x, r, n, block, out);
    }
    template <typename T, bool Four, bool Add>
    __attribute__((target("avx2"))) static void dequantize(const unsigned char *p, std::size_t n, std::size_t block,
                                                           T *out) {
        dequantize_chunk<T, Four, Add>(p, n, block, out);
    }
    template <typename T, bool Feedback>
    __attribute__((target("avx2"))) static void half_enc(const T *x, T *r, std::size_t n, bool brain,
                                                         std::uint16_t *out) {
        half_encode<T, Feedback>(x, r, n, brain, out);
    }
    template <typename T, bool Add>
    __attribute__((target("avx2"))) static void half_dec(const std::uint16_t *in, std::size_t n, bool brain, T *out) {
        half_decode<T, Add>(in, n, brain, out);
    }
    // f32: eight magnitudes compared at once; most groups hold no candidate and cost no branch miss.
    template <typename T, bool Feedback>
    __attribute__((target("avx2"))) static std::size_t collect(const T *x, T *r, std::size_t n, MagnitudeKey<T> floor,
                                                               Ranked<T> *out) {
        if constexpr (sizeof(T) != 4) {
            return collect_from<T, Feedback>(x, r, 0, n, floor, out, 0);
        } else {
            // Keys are at most 0x7fffffff, so a signed compare with floor - 1 is key >= floor.
            const __m256i magnitude_mask = _mm256_set1_epi32(0x7fffffff);
            const __m256i below = _mm256_set1_epi32(std::int32_t(floor) - 1);
            alignas(32) std::uint32_t keys[8];
            std::size_t found = 0, i = 0;
            for (; i + 8 <= n; i += 8) {
                __m256 c = _mm256_loadu_ps(x + i);
                if constexpr (Feedback) {
                    c = _mm256_add_ps(c, _mm256_loadu_ps(r + i));
                    _mm256_storeu_ps(r + i, c);
                }
                const __m256i key = _mm256_and_si256(_mm256_castps_si256(c), magnitude_mask);
                unsigned mask = unsigned(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(key, below))));
                if (mask == 0) continue;
                _mm256_store_si256(reinterpret_cast<__m256i *>(keys), key);
                for (; mask != 0; mask &= mask - 1) {
                    const unsigned lane = unsigned(__builtin_ctz(mask));
                    out[found++] = {keys[lane], std::uint32_t(i + lane)};
                }
            }
            return collect_from<T, Feedback>(x, r, i, n, floor, out, found);
        }
    }
};
#define SHARDOPT_CODEC_DISPATCH(...) (optim_kernels::use_avx2() ? LoopsAvx2::__VA_ARGS__ : Loops::__VA_ARGS__)
#else
#define SHARDOPT_CODEC_DISPATCH(...) (Loops::__VA_ARGS__)
#endif

// The k elements of largest magnitude (ties by lower index), in index order.
//
// A full selection over a chunk of millions of elements costs far more than the send it saves,
// so it runs on candidates only: a fixed sample of the chunk gives a magnitude that, with a
// wide margin, at least k elements reach; one pass collects the elements at or above it, and the
// exact selection runs on those (falling back to every element when too few qualify). The
// result is the exact top k either way, so it does not depend on the sample.

template <typename T>
void select_top_k(const T *x, T *residual, std::size_t count, std::size_t k, std::vector<Ranked<T>> &candidates,
                  std::vector<Ranked<T>> &work, std::vector<std::uint32_t> &selected) {
    using Key = MagnitudeKey<T>;
    auto compensated = [&](std::size_t i) { return residual ? T(x[i] + residual[i]) : x[i]; };
    Key floor = 0;
    constexpr std::size_t kSample = 4096;
    if (count > 4 * kSample && k * 8 < count) {
        std::vector<Key> sample(kSample);
        for (std::size_t j = 0; j < kSample; ++j) sample[j] = magnitude_key(compensated(j * count / kSample));
        const double expected = double(k) / double(count) * double(kSample);
        const auto rank = std::size_t(std::min(double(kSample - 1), 2.0 * expected + 4.0 * std::sqrt(expected) + 8.0));
        std::nth_element(sample.begin(), sample.begin() + std::ptrdiff_t(rank), sample.end(), std::greater<Key>());
        floor = sample[rank];
    }
    // Sized for the largest chunk once and never shrunk, so no pass re-initializes it.
    if (candidates.size() < count) candidates.resize(count);
    std::size_t found = residual ? SHARDOPT_CODEC_DISPATCH(template collect<T, true>)(x, residual, count, floor, candidates.data())
                                 : SHARDOPT_CODEC_DISPATCH(template collect<T, false>)(x, residual, count, floor, candidates.data());
    const T *c = residual ? residual : x; // the residual now holds x + residual
    if (found < k) { // the sample misled: select among every element
        for (std::size_t i = 0; i < count; ++i) candidates[i] = {magnitude_key(c[i]), std::uint32_t(i)};
        found = count;
    }
    work.assign(candidates.begin(), candidates.begin() + std::ptrdiff_t(found));
    std::nth_element(work.begin(), work.begin() + std::ptrdiff_t(k - 1), work.end());
    const Ranked<T> last = work[k - 1]; // the k-th: exactly k candidates are not after it
    selected.clear();
    for (std::size_t j = 0; j < found; ++j) // candidates are in index order
        if (!(last < candidates[j])) selected.push_back(candidates[j].index);
}

} // namespace

struct ChunkCodec::TopKScratch {
    std::vector<Ranked<float>> f32, f32_work;
    std::vector<Ranked<double>> f64, f64_work;
    void select(const float *x, float *residual, std::size_t count, std::size_t k, std::vector<std::uint32_t> &out) {
        select_top_k(x, residual, count, k, f32, f32_work, out);
    }
    void select(const double *x, double *residual, std::size_t count, std::size_t k, std::vector<std::uint32_t> &out) {
        select_top_k(x, residual, count, k, f64, f64_work, out);
    }
};

ChunkCodec::~ChunkCodec() = default;
ChunkCodec::ChunkCodec(ChunkCodec &&) noexcept = default;

ChunkCodec::ChunkCodec(const CompressionOptions &options, DType dtype)
    : options_(options), dtype_(dtype), top_k_(std::make_unique<TopKScratch>()) {
    require(dtype == DType::f32 || dtype == DType::f64, ErrorCode::unsupported,
            std::string("gradient compression needs f32 or f64 parameters, not ") + dtype_name(dtype));
    require(options.method != GradientCompression::none && options.method != GradientCompression::power_sgd,
            ErrorCode::internal, "ChunkCodec: not a chunk method");
}

std::size_t ChunkCodec::top_k_count(std::size_t count) const {
    if (count == 0) return 0;
    const auto k = std::size_t(std::ceil(options_.ratio * double(count)));
    return std::clamp<std::size_t>(k, 1, count);
}

std::size_t ChunkCodec::payload_bytes(std::size_t count) const {
    const std::size_t block = std::size_t(options_.block_size);
    switch (options_.method) {
    case GradientCompression::bf16:
    case GradientCompression::fp16: return count * 2;
    case GradientCompression::int8: return blocks_of(count, block) * 4 + count;
    case GradientCompression::int4: return blocks_of(count, block) * 4 + (count + 1) / 2;
    case GradientCompression::top_k: return top_k_count(count) * 8;
    default: return 0;
    }
}

void ChunkCodec::encode(const void *x, std::size_t count, unsigned char *out, void *residual) {
    if (dtype_ == DType::f32) encode_as(static_cast<const float *>(x), count, out, static_cast<float *>(residual));
    else encode_as(static_cast<const double *>(x), count, out, static_cast<double *>(residual));
}

void ChunkCodec::decode(const unsigned char *payload, std::size_t count, void *out) const {
    if (dtype_ == DType::f32) decode_as(payload, count, static_cast<float *>(out), false);
    else decode_as(payload, count, static_cast<double *>(out), false);
}

void ChunkCodec::decode_add(const unsigned char *payload, std::size_t count, void *accum) const {
    if (dtype_ == DType::f32) decode_as(payload, count, static_cast<float *>(accum), true);
    else decode_as(payload, count, static_cast<double *>(accum), true);
}

template <typename T> void ChunkCodec::encode_as(const T *x, std::size_t count, unsigned char *out, T *residual) {
    const std::size_t block = std::size_t(options_.block_size);
    const bool feedback = residual != nullptr;
    switch (options_.method) {
    case GradientCompression::bf16:
    case GradientCompression::fp16: {
        const bool brain = options_.method == GradientCompression::bf16;
        const bool aligned = reinterpret_cast<std::uintptr_t>(out) % alignof(std::uint16_t) == 0;
        std::uint16_t *bits = reinterpret_cast<std::uint16_t *>(out);
        if (!aligned) {
            half_scratch_.resize(count);
            bits = half_scratch_.data();
        }
        if (feedback) SHARDOPT_CODEC_DISPATCH(template half_enc<T, true>)(x, residual, count, brain, bits);
        else SHARDOPT_CODEC_DISPATCH(template half_enc<T, false>)(x, residual, count, brain, bits);
        if (!aligned) std::memcpy(out, bits, count * 2);
        return;
    }
    case GradientCompression::int8:
        if (feedback) SHARDOPT_CODEC_DISPATCH(template quantize<T, false, true>)(x, residual, count, block, out);
        else SHARDOPT_CODEC_DISPATCH(template quantize<T, false, false>)(x, residual, count, block, out);
        return;
    case GradientCompression::int4:
        if (feedback) SHARDOPT_CODEC_DISPATCH(template quantize<T, true, true>)(x, residual, count, block, out);
        else SHARDOPT_CODEC_DISPATCH(template quantize<T, true, false>)(x, residual, count, block, out);
        return;
    case GradientCompression::top_k: {
        // With feedback the selection leaves x + residual in the residual; the sent part is
        // taken out of it below.
        const std::size_t k = top_k_count(count);
        top_k_->select(x, residual, count, k, selected_);
        const T *c = feedback ? residual : x;
        for (std::size_t j = 0; j < k; ++j) {
            const std::uint32_t index = selected_[j];
            const float value = float(c[index]);
            std::memcpy(out + 8 * j, &index, 4);
            std::memcpy(out + 8 * j + 4, &value, 4);
            if (feedback) residual[index] = T(residual[index] - T(value));
        }
        return;
    }
    default: throw Error(ErrorCode::internal, "ChunkCodec: not a chunk method");
    }
}

template <typename T>
void ChunkCodec::decode_as(const unsigned char *payload, std::size_t count, T *out, bool add) const {
    const std::size_t block = std::size_t(options_.block_size);
    switch (options_.method) {
    case GradientCompression::bf16:
    case GradientCompression::fp16: {
        const bool brain = options_.method == GradientCompression::bf16;
        // The payload is a byte stream with no alignment promise: read it as u16 through a copy
        // only when it is misaligned (the reducers' payloads are aligned).
        const std::uint16_t *in = reinterpret_cast<const std::uint16_t *>(payload);
        std::vector<std::uint16_t> aligned;
        if (reinterpret_cast<std::uintptr_t>(payload) % alignof(std::uint16_t) != 0) {
            aligned.resize(count);
            std::memcpy(aligned.data(), payload, count * 2);
            in = aligned.data();
        }
        if (add) SHARDOPT_CODEC_DISPATCH(template half_dec<T, true>)(in, count, brain, out);
        else SHARDOPT_CODEC_DISPATCH(template half_dec<T, false>)(in, count, brain, out);
        return;
    }
    case GradientCompression::int8:
        if (add) SHARDOPT_CODEC_DISPATCH(template dequantize<T, false, true>)(payload, count, block, out);
        else SHARDOPT_CODEC_DISPATCH(template dequantize<T, false, false>)(payload, count, block, out);
        return;
    case GradientCompression::int4:
        if (add) SHARDOPT_CODEC_DISPATCH(template dequantize<T, true, true>)(payload, count, block, out);
        else SHARDOPT_CODEC_DISPATCH(template dequantize<T, true, false>)(payload, count, block, out);
        return;
    case GradientCompression::top_k: {
        if (!add) std::fill(out, out + count, T(0));
        const std::size_t k = top_k_count(count);
        for (std::size_t j = 0; j < k; ++j) {
            std::uint32_t index;
            float value;
            std::memcpy(&index, payload + 8 * j, 4);
            std::memcpy(&value, payload + 8 * j + 4, 4);
            if (index >= count)
                throw Error(ErrorCode::corrupt, "compressed gradient: top-k index " + std::to_string(index) +
                                                    " outside a chunk of " + std::to_string(count));
            out[index] = T(out[index] + T(value));
        }
        return;
    }
    default: throw Error(ErrorCode::internal, "ChunkCodec: not a chunk method");
    }
}

} // namespace shardopt::compression

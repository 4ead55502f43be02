#include "chunk_codec.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "shardopt/error.hpp"
#include "shardopt/half.hpp"

namespace shardopt::compression {
namespace {

std::size_t blocks_of(std::size_t count, std::size_t block) { return (count + block - 1) / block; }

// The scale of a block: absmax / levels, NaN when the block holds a non-finite value (so the
// whole block decodes to NaN and the step is skipped).
template <typename T> float block_scale(const T *x, std::size_t n, float levels) {
    double absmax = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
        const double a = std::fabs(double(x[i]));
        if (!std::isfinite(a)) return std::numeric_limits<float>::quiet_NaN();
        absmax = std::max(absmax, a);
    }
    return float(absmax / levels);
}

int quantize(double x, float scale, int levels) {
    if (scale == 0.0f) return 0;
    const double q = std::nearbyint(x / double(scale));
    return int(std::clamp(q, double(-levels), double(levels)));
}

// top_k's order: larger magnitude first, NaN as the largest, ties by index.
template <typename T> double magnitude(T v) {
    const double a = std::fabs(double(v));
    return std::isnan(a) ? std::numeric_limits<double>::infinity() : a;
}

} // namespace

ChunkCodec::ChunkCodec(const CompressionOptions &options, DType dtype) : options_(options), dtype_(dtype) {
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

void ChunkCodec::encode(const void *x, std::size_t count, unsigned char *out) {
    if (dtype_ == DType::f32) encode_as(static_cast<const float *>(x), count, out);
    else encode_as(static_cast<const double *>(x), count, out);
}

void ChunkCodec::decode(const unsigned char *payload, std::size_t count, void *out) const {
    if (dtype_ == DType::f32) decode_as(payload, count, static_cast<float *>(out), false);
    else decode_as(payload, count, static_cast<double *>(out), false);
}

void ChunkCodec::decode_add(const unsigned char *payload, std::size_t count, void *accum) const {
    if (dtype_ == DType::f32) decode_as(payload, count, static_cast<float *>(accum), true);
    else decode_as(payload, count, static_cast<double *>(accum), true);
}

template <typename T> void ChunkCodec::encode_as(const T *x, std::size_t count, unsigned char *out) {
    const std::size_t block = std::size_t(options_.block_size);
    switch (options_.method) {
    case GradientCompression::bf16:
        for (std::size_t i = 0; i < count; ++i) {
            const std::uint16_t bits = bf16::from_float(float(x[i]));
            std::memcpy(out + 2 * i, &bits, 2);
        }
        return;
    case GradientCompression::fp16:
        for (std::size_t i = 0; i < count; ++i) {
            const std::uint16_t bits = f16::from_float(float(x[i]));
            std::memcpy(out + 2 * i, &bits, 2);
        }
        return;
    case GradientCompression::int8:
    case GradientCompression::int4: {
        const bool four = options_.method == GradientCompression::int4;
        const int levels = four ? 7 : 127;
        const std::size_t nblocks = blocks_of(count, block);
        unsigned char *q = out + nblocks * 4;
        if (four) std::memset(q, 0, (count + 1) / 2);
        for (std::size_t b = 0; b < nblocks; ++b) {
            const std::size_t begin = b * block, n = std::min(block, count - begin);
            const float scale = block_scale(x + begin, n, float(levels));
            std::memcpy(out + 4 * b, &scale, 4);
            for (std::size_t i = begin; i < begin + n; ++i) {
                const int v = std::isnan(scale) ? 0 : quantize(double(x[i]), scale, levels);
                if (four) q[i / 2] |= static_cast<unsigned char>((v + 8) << ((i & 1) * 4));
                else q[i] = static_cast<unsigned char>(static_cast<std::int8_t>(v));
            }
        }
        return;
    }
    case GradientCompression::top_k: {
        const std::size_t k = top_k_count(count);
        order_.resize(count);
        std::iota(order_.begin(), order_.end(), 0u);
        auto before = [x](std::uint32_t a, std::uint32_t b) {
            const double ma = magnitude(x[a]), mb = magnitude(x[b]);
            return ma > mb || (ma == mb && a < b);
        };
        std::nth_element(order_.begin(), order_.begin() + std::ptrdiff_t(k - 1), order_.end(), before);
        std::sort(order_.begin(), order_.begin() + std::ptrdiff_t(k)); // by index: sequential decode
        for (std::size_t j = 0; j < k; ++j) {
            const std::uint32_t index = order_[j];
            const float value = float(x[index]);
            std::memcpy(out + 8 * j, &index, 4);
            std::memcpy(out + 8 * j + 4, &value, 4);
        }
        return;
    }
    default: throw Error(ErrorCode::internal, "ChunkCodec: not a chunk method");
    }
}

template <typename T>
void ChunkCodec::decode_as(const unsigned char *payload, std::size_t count, T *out, bool add) const {
    auto put = [&](std::size_t i, double v) { out[i] = add ? T(out[i] + T(v)) : T(v); };
    const std::size_t block = std::size_t(options_.block_size);
    switch (options_.method) {
    case GradientCompression::bf16:
    case GradientCompression::fp16:
        for (std::size_t i = 0; i < count; ++i) {
            std::uint16_t bits;
            std::memcpy(&bits, payload + 2 * i, 2);
            bf16 b;
            f16 h;
            b.bits = h.bits = bits;
            put(i, options_.method == GradientCompression::bf16 ? float(b) : float(h));
        }
        return;
    case GradientCompression::int8:
    case GradientCompression::int4: {
        const bool four = options_.method == GradientCompression::int4;
        const std::size_t nblocks = blocks_of(count, block);
        const unsigned char *q = payload + nblocks * 4;
        for (std::size_t b = 0; b < nblocks; ++b) {
            float scale;
            std::memcpy(&scale, payload + 4 * b, 4);
            const std::size_t begin = b * block, end = std::min(count, begin + block);
            for (std::size_t i = begin; i < end; ++i) {
                const int v = four ? int((q[i / 2] >> ((i & 1) * 4)) & 0xf) - 8 : int(static_cast<std::int8_t>(q[i]));
                put(i, double(scale) * double(v));
            }
        }
        return;
    }
    case GradientCompression::top_k: {
        if (!add) std::fill(out, out + count, T(0));
        const std::size_t k = top_k_count(count);
        for (std::size_t j = 0; j < k; ++j) {
            std::uint32_t index;
            float value;
            std::memcpy(&index, payload + 8 * j, 4);
            std::memcpy(&value, payload + 8 * j + 4, 4);
            require(index < count, ErrorCode::corrupt,
                    "compressed gradient: top-k index " + std::to_string(index) + " outside a chunk of " +
                        std::to_string(count));
            out[index] = T(out[index] + T(value));
        }
        return;
    }
    default: throw Error(ErrorCode::internal, "ChunkCodec: not a chunk method");
    }
}

} // namespace shardopt::compression

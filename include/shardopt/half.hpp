// IEEE binary16 (f16) and bfloat16 storage types with round-to-nearest-even conversion.
// Arithmetic is done in float: these types only store.
#pragma once

#include <cstdint>
#include <cstring>

namespace shardopt {

namespace detail {
inline uint32_t float_bits(float f) noexcept { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float bits_float(uint32_t u) noexcept { float f; std::memcpy(&f, &u, 4); return f; }
} // namespace detail

struct bf16 {
    uint16_t bits = 0;
    bf16() = default;
    explicit bf16(float f) noexcept : bits(from_float(f)) {}
    explicit operator float() const noexcept { return detail::bits_float(uint32_t(bits) << 16); }

    static uint16_t from_float(float f) noexcept {
        uint32_t u = detail::float_bits(f);
        if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u); // quiet NaN
        u += 0x7fffu + ((u >> 16) & 1u);                                          // nearest even
        return uint16_t(u >> 16);
    }
};

struct f16 {
    uint16_t bits = 0;
    f16() = default;
    explicit f16(float f) noexcept : bits(from_float(f)) {}
    explicit operator float() const noexcept { return detail::bits_float(to_float_bits(bits)); }

    static uint16_t from_float(float f) noexcept {
        uint32_t u = detail::float_bits(f);
        uint32_t sign = (u >> 16) & 0x8000u;
        uint32_t mag = u & 0x7fffffffu;
        if (mag > 0x7f800000u) return uint16_t(sign | 0x7e00u); // NaN
        if (mag >= 0x477ff000u) return uint16_t(sign | 0x7c00u); // rounds to inf
        if (mag < 0x38800000u) {                                // subnormal or zero in f16
            // Align to the f16 subnormal unit (2^-24) using float addition, which rounds to even.
            float r = detail::bits_float(mag) + 0.5f;
            return uint16_t(sign | (detail::float_bits(r) - 0x3f000000u));
        }
        uint32_t mant_odd = (mag >> 13) & 1u;
        mag += 0xc8000fffu + mant_odd; // rebias exponent (-112 << 23) and round to nearest even
        return uint16_t(sign | (mag >> 13));
    }

    static uint32_t to_float_bits(uint16_t h) noexcept {
        uint32_t sign = uint32_t(h & 0x8000u) << 16;
        uint32_t exp = (h >> 10) & 0x1fu;
        uint32_t mant = h & 0x3ffu;
        if (exp == 0x1f) return sign | 0x7f800000u | (mant << 13); // inf / NaN
        if (exp == 0) {
            if (mant == 0) return sign;
            float f = float(mant) * (1.0f / 16777216.0f); // subnormal: mant * 2^-24
            return sign | detail::float_bits(f);
        }
        return sign | ((exp + 112u) << 23) | (mant << 13);
    }
};


} // namespace shardopt

// The 8-bit codes' cell table (lowbit.hpp) and the arithmetic around its lookup: |x|'s float bits,
// shifted right by kKeyShift, index a table of cells (24 binades from 2^-23 up to 2,
// kKeyMantissaBits mantissa bits each) that each hold at most one threshold between codes: entry =
// (code of the cell's low end) << 24 | (the threshold's low bits, or all ones for none). Plain
// C++, host and device: lowbit::encode8, the CPU rules' batched encoder (lowbit_rules.cpp) and the
// CUDA kernels (cuda/lowbit_codes.hpp) all encode through these, so their codes are one.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define SHARDOPT_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define SHARDOPT_HOST_DEVICE inline
#endif

namespace shardopt::lowbit {

constexpr int kKeyMantissaBits = 7;
constexpr int kKeyShift = 23 - kKeyMantissaBits;
constexpr std::uint32_t kKeyLowMask = (std::uint32_t(1) << kKeyShift) - 1;
constexpr std::uint32_t kKeyFirstBits = std::uint32_t(127 - 23) << 23; // 2^-23
constexpr std::uint32_t kKeyBase = kKeyFirstBits >> kKeyShift;
constexpr int kKeyCells = 24 << kKeyMantissaBits;

// The cell of a magnitude's float bits: below 2^-23 the subtraction wraps and, as anything past 2
// (NaN included), takes the last cell; cell_code gives those below 2^-23 the zero code.
SHARDOPT_HOST_DEVICE std::uint32_t cell_key(std::uint32_t magnitude) {
    const std::uint32_t key = (magnitude >> kKeyShift) - kKeyBase;
    return key < std::uint32_t(kKeyCells) ? key : std::uint32_t(kKeyCells - 1);
}

// The nearest code of the magnitude from its cell's entry: the cell's low code, or the next one
// past the cell's threshold; `zero` (the code of 0) below 2^-23.
SHARDOPT_HOST_DEVICE std::uint32_t cell_code(std::uint32_t entry, std::uint32_t magnitude, std::uint32_t zero) {
    const std::uint32_t code = (entry >> 24) + ((magnitude & kKeyLowMask) > (entry & kKeyLowMask) ? 1u : 0u);
    return magnitude < kKeyFirstBits ? zero : code;
}

// A signed map's code for a negative value whose magnitude's code is `code`: the positive half
// mirrored (254 - code), but at its end -1 stands for both +0.993 and +1: code 0 (-1) above the
// `negative_top` threshold bits (Codebook8::negative_top), else code 1. Plain selects: passed the
// threshold by value, a loop over many values keeps it in a register and runs no branch.
SHARDOPT_HOST_DEVICE std::uint32_t negative_code(std::uint32_t code, std::uint32_t magnitude,
                                                 std::uint32_t negative_top) {
    const std::uint32_t end = magnitude > negative_top ? 0u : 1u;
    return code >= 254 ? end : 254u - code;
}

} // namespace shardopt::lowbit

// The 8-bit codes' cell table keys (lowbit.hpp): |x|'s float bits, shifted right by kKeyShift,
// index a table of cells (24 binades from 2^-23 up to 2, kKeyMantissaBits mantissa bits each) that
// each hold at most one threshold between codes: entry = (code of the cell's low end) << 24 | (the
// threshold's low bits, or all ones for none). Plain constants: the CPU rules and the CUDA
// kernels (cuda/lowbit_codes.hpp) index the same table.
#pragma once

#include <cstdint>

namespace shardopt::lowbit {

constexpr int kKeyMantissaBits = 7;
constexpr int kKeyShift = 23 - kKeyMantissaBits;
constexpr std::uint32_t kKeyLowMask = (std::uint32_t(1) << kKeyShift) - 1;
constexpr std::uint32_t kKeyFirstBits = std::uint32_t(127 - 23) << 23; // 2^-23
constexpr std::uint32_t kKeyBase = kKeyFirstBits >> kKeyShift;
constexpr int kKeyCells = 24 << kKeyMantissaBits;

} // namespace shardopt::lowbit

// The CUDA optimizer's low-bit state (src/optim/lowbit.hpp's format): the codebooks as the
// kernels read them, the device tables of quantized tensors, and the nearest-code searches.
// Plain C++ shared by the host code, the .cu files and the CPU unit test that checks the
// searches against lowbit::encode8 / encode4 (tests/unit/test_lowbit_device_codes.cpp).
//
// 8-bit: the same cell table as lowbit.hpp's encoder (one lookup by |x|'s float bits, one compare
// with the cell's threshold), which the kernels hold in shared memory: the code is the CPU's by
// construction, NaN included (its key is past the last cell, which gives the top code).
#pragma once

#include <cstdint>
#include <cstring>

#include "../lowbit_keys.hpp" // and SHARDOPT_HOST_DEVICE

namespace shardopt::cuda::detail {

// Slot 0 (Adam's m, SGD's momentum) uses the signed maps, slot 1 (v) the unsigned ones.
constexpr int kLowbitSlots = 2;

struct LowbitBooks {
    // 8-bit: book b's 256 values and its cell table (lowbit::Codebook8::cells).
    float values8[kLowbitSlots][256];
    std::uint32_t cells8[kLowbitSlots][lowbit::kKeyCells];
    std::uint32_t zero8[kLowbitSlots];
    std::uint32_t negative_top8[kLowbitSlots]; // signed: lowbit::Codebook8::negative_top
    // 4-bit: 16 values and their 15 thresholds, as lowbit::Codebook4.
    float values4[kLowbitSlots][16];
    float thresholds4[kLowbitSlots][15];
};

// One quantized tensor, or a slice of one (the step engine's shards): its row in the tensor table
// (parameters, gradient, master weights: the slice's elements) and per slot its codes (8-bit: a
// byte each; 4-bit: two a byte, the even code in the low nibble) and block scales, blocks counted
// from the tensor's first element (lowbit.hpp's LowBitArray: the arrays start at the slice's first
// block, and element i of the slice has code index first + i).
//
// A slice's first or last block may be cut by a shard boundary (shared[0], shared[1]): its scale
// is then the maximum over every rank's part. A maxima pass (kLowbitMaxima) writes this slice's
// part of each such block's new maximum into tops[end * kLowbitSlots + slot] (end 0: the first
// block, 1: the last); the update then reads the maxima combined across ranks from there.
struct LowbitEntry {
    std::int32_t tensor = 0;
    std::uint8_t *codes[kLowbitSlots] = {};
    float *scales[kLowbitSlots] = {};
    std::int64_t first = 0;           // the slice's offset in its tensor modulo the block (0: whole tensor)
    std::int64_t end = 0;             // first + the slice's elements
    std::int32_t shared[2] = {0, 0};  // first / last block shared with other ranks
    float *tops = nullptr;            // [2][kLowbitSlots] where some block is shared, else null
};

// A launch works through groups of kLowbitGroup code indices of one quantized tensor (the
// Chunk rows of the group table: tensor = the LowbitEntry's index, offset a multiple of
// kLowbitGroup from code index 0), a block per group at a time: one 8-bit block or two 4-bit
// blocks, one element per thread.
constexpr int kLowbitGroup = 256;

SHARDOPT_HOST_DEVICE std::uint32_t lowbit_float_bits(float x) {
#if defined(__CUDA_ARCH__)
    return __float_as_uint(x);
#else
    std::uint32_t b;
    std::memcpy(&b, &x, sizeof b);
    return b;
#endif
}

SHARDOPT_HOST_DEVICE float lowbit_bits_float(std::uint32_t b) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(b);
#else
    float x;
    std::memcpy(&x, &b, sizeof x);
    return x;
#endif
}

// lowbit::encode8, operation for operation: the nearest code of y; ties to the code nearer zero;
// the signed map's negative half mirrors the positive one (code 254 - c) but at its end
// (lowbit::negative_code: -1 or the next code, by negative_top).
SHARDOPT_HOST_DEVICE std::uint8_t encode8_cells(const std::uint32_t *cells, std::uint32_t zero, bool is_signed,
                                                std::uint32_t negative_top, float y) {
    const std::uint32_t bits = lowbit_float_bits(y), magnitude = bits & 0x7fffffffu;
    std::uint32_t code = lowbit::cell_code(cells[lowbit::cell_key(magnitude)], magnitude, zero);
    if (is_signed && (bits >> 31)) code = lowbit::negative_code(code, magnitude, negative_top);
    return std::uint8_t(code);
}

// lowbit::encode4: the number of thresholds below y (NaN: none).
SHARDOPT_HOST_DEVICE std::uint8_t encode4_search(const float *thresholds, float y) {
    unsigned code = 0;
    for (int i = 0; i < 15; ++i) code += y > thresholds[i] ? 1u : 0u;
    return std::uint8_t(code);
}

} // namespace shardopt::cuda::detail

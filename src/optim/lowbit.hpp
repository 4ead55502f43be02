// Low-bit optimizer state: blockwise dynamic quantization of Adam's, AdamW's and SGD's moments.
//
// A state array of a tensor is cut into blocks of block_elements() elements counted from the
// tensor's first element (the GLOBAL element index, never a shard's), and each block keeps its
// absolute maximum (a float, the scale) and one code per element: the nearest value of a fixed
// codebook (codebooks.hpp) to element / scale. 8-bit: bitsandbytes' dynamic map, signed for the
// first moment and unsigned for the second, 256-element blocks; 4-bit: torchao's maps (signed
// dynamic, unsigned linear without zero), 128-element blocks. The signed maps reach -1 (the
// libraries' stop at -0.993 / -0.8875), so the largest magnitude of a block decodes exactly
// whatever its sign, and decoded state (a checkpoint's) encodes back to the same codes and scales. Tensors under kMinElements keep
// full-precision state (bitsandbytes' min_8bit_size), decided from the whole tensor's count. So
// which numbers a rank holds never depends on the strategy or the world size, and a block cut by
// a shard boundary is quantized with the maximum over all of its parts (the engine combines
// them across ranks, Optimizer::phase_op max).
//
// Ties: a value exactly on the threshold between two codes takes the code nearer zero (8-bit) or
// the lower code (4-bit codes count the thresholds strictly below the value). element / scale is
// computed as element * (1 / scale), with 1 / 0 taken as 0 (an all-zero block).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "codebooks.hpp"
#include "lowbit_keys.hpp"
#include "shardopt/optim.hpp"

namespace shardopt::lowbit {

constexpr std::size_t kMinElements = 4096;
constexpr std::size_t kBlock8 = 256;
constexpr std::size_t kBlock4 = 128;

// 0 for full precision.
constexpr std::size_t block_elements(StatePrecision p) {
    return p == StatePrecision::bits8 ? kBlock8 : p == StatePrecision::bits4 ? kBlock4 : 0;
}
constexpr int code_bits(StatePrecision p) { return p == StatePrecision::bits8 ? 8 : p == StatePrecision::bits4 ? 4 : 0; }
// Whether a tensor of `elements` keeps low-bit state under precision p.
constexpr bool quantizes(StatePrecision p, std::size_t elements) {
    return p != StatePrecision::full && elements >= kMinElements;
}

// Bytes of one low-bit array over elements [offset, offset + count) of a tensor: the codes from
// the first block's start, and one scale per block touched.
std::size_t code_bytes(StatePrecision p, std::size_t offset, std::size_t count);
std::size_t blocks_touched(StatePrecision p, std::size_t offset, std::size_t count);

// The blocks of a tensor that slice boundaries at `cuts` (element offsets inside the tensor, in
// any order) fall strictly inside: the blocks shared by two or more slices, ascending, each once.
std::vector<std::size_t> shared_blocks(std::size_t block, const std::vector<std::size_t> &cuts);
// Where a slice [offset, offset + count) finds its first and last block in `shared` (as
// Segment::shared_first / shared_last: the index in `shared`, or npos when that block is whole
// in the slice).
struct SharedEnds {
    std::size_t first, last;
};
SharedEnds shared_ends(std::size_t block, const std::vector<std::size_t> &shared, std::size_t offset,
                       std::size_t count, std::size_t tensor_count);

// --- 8-bit codes: nearest code by one table lookup (the keys: lowbit_keys.hpp) -----------------

struct Codebook8 {
    const float *values;           // 256 codes' values, ascending
    std::uint32_t cells[kKeyCells]; // of the non-negative half (signed: codes 127 .. 255)
    std::uint8_t zero;              // the code of 0
    bool is_signed;
    // Signed: the negative half mirrors the positive one (code 254 - c for the positive code c)
    // but at its end, where -1 stands for +0.993 and +1: a magnitude above this threshold's
    // (the float bits of |(values[0] + values[1]) / 2|) is code 0 (-1), else code 1.
    std::uint32_t negative_top;
};

const Codebook8 &signed8();   // first moment
const Codebook8 &unsigned8(); // second moment

inline std::uint32_t float_bits(float x) {
    std::uint32_t b;
    std::memcpy(&b, &x, sizeof b);
    return b;
}

// Nearest code of x (x = value / scale, in [-1, 1] up to rounding; anything else is clamped).
inline std::uint8_t encode8(const Codebook8 &book, float x) {
    const std::uint32_t bits = float_bits(x);
    const std::uint32_t magnitude = bits & 0x7fffffffu;
    std::uint32_t code = cell_code(book.cells[cell_key(magnitude)], magnitude, book.zero);
    if (book.is_signed && (bits >> 31)) code = negative_code(code, magnitude, book.negative_top);
    return std::uint8_t(code);
}

// --- 4-bit codes: the number of thresholds below x -----------------------------------------------
struct Codebook4 {
    const float *values;   // 16 codes' values, ascending
    float thresholds[15];  // (values[i] + values[i + 1]) / 2
    float pairs[256][2];   // the values of a byte's two codes, the low nibble first
};
const Codebook4 &signed4();
const Codebook4 &unsigned4();

inline std::uint8_t encode4(const Codebook4 &book, float x) {
    unsigned code = 0;
    for (int i = 0; i < 15; ++i) code += x > book.thresholds[i] ? 1u : 0u;
    return std::uint8_t(code);
}

// A quantized state array over elements [offset, offset + count) of a tensor (LowBitArray's
// layout) as values, each its code's value times its block's scale, computed in T as the rules
// decode them; and back (checkpoints, state synchronization): each block's scale is the largest
// |value| of the block, each value its nearest code, as the rules encode a block. A block the
// slice holds only part of takes the largest |value| of its other parts as first_top (the slice's
// first block) or last_top (its last), combined across ranks by the caller; negative: none. Values
// that were decoded come back as the same codes and scales.
template <typename T>
void decode_slice(const LowBitArray &a, StatePrecision p, bool is_signed, std::size_t offset, std::size_t count,
                  T *out);
template <typename T>
void encode_slice(const LowBitArray &a, StatePrecision p, bool is_signed, std::size_t offset, std::size_t count,
                  const T *values, double first_top = -1.0, double last_top = -1.0);
// The largest |value| of the slice's first and last block's runs (what encode_slice's partners
// need as their first_top / last_top).
template <typename T> double head_top(StatePrecision p, std::size_t offset, std::size_t count, const T *values);
template <typename T> double tail_top(StatePrecision p, std::size_t offset, std::size_t count, const T *values);

// The codebooks of a precision: signed for the first moment (and SGD's momentum), unsigned for
// the second.
struct Books {
    const Codebook8 *signed8 = nullptr, *unsigned8 = nullptr;
    const Codebook4 *signed4 = nullptr, *unsigned4 = nullptr;
};

} // namespace shardopt::lowbit

// ChunkCodec: one compression method's encoding of a run of gradient elements (a chunk of a
// bucket) into a payload whose size depends only on the element count, so every rank knows
// what it will receive without negotiating. Deterministic: the same input gives the same bytes
// on every machine (round-to-nearest-even, ties in top-k broken by index).
//
// Payload layouts (little-endian):
//   bf16/fp16  count x u16
//   int8       nblocks x f32 scale, then count x i8       (scale = absmax / 127)
//   int4       nblocks x f32 scale, then ceil(count/2) u8 (two 4-bit values, q + 8; scale = absmax / 7)
//   top_k      k x (u32 index, f32 value) in index order, k = max(1, ceil(ratio x count)): the k
//              largest |x|, ties by lower index, NaN above infinity
// A non-finite element makes its block (int8/int4) or itself (top_k: NaN sorts as largest)
// decode non-finite, so the step that sees it is skipped like an uncompressed one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "shardopt/compression.hpp"
#include "shardopt/types.hpp"

namespace shardopt::compression {

class ChunkCodec {
  public:
    // dtype: the gradients' (f32 or f64). method: anything but none and power_sgd.
    ChunkCodec(const CompressionOptions &options, DType dtype);
    ~ChunkCodec();
    ChunkCodec(ChunkCodec &&) noexcept;

    std::size_t payload_bytes(std::size_t count) const;
    // Encodes x[0, count) (elements of the dtype) into out (payload_bytes(count)). With a
    // residual (error feedback, count elements), encodes x + residual instead and leaves in the
    // residual what the payload misses: (x + residual) - decode(out). One pass over the chunk.
    void encode(const void *x, std::size_t count, unsigned char *out, void *residual = nullptr);
    // out[0, count) = the values the payload stands for.
    void decode(const unsigned char *payload, std::size_t count, void *out) const;
    // accum[i] += value i of the payload, in element order.
    void decode_add(const unsigned char *payload, std::size_t count, void *accum) const;

  private:
    std::size_t top_k_count(std::size_t count) const;
    template <typename T> void encode_as(const T *x, std::size_t count, unsigned char *out, T *residual);
    template <typename T> void decode_as(const unsigned char *payload, std::size_t count, T *out, bool add) const;

    CompressionOptions options_;
    DType dtype_;
    struct TopKScratch; // candidates of the selection, kept between chunks
    std::unique_ptr<TopKScratch> top_k_;
    std::vector<std::uint32_t> selected_;     // top_k: the chosen k
    std::vector<std::uint16_t> half_scratch_;      // bf16/fp16 into a misaligned payload
};

} // namespace shardopt::compression

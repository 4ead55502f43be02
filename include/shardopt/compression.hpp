// Gradient compression: fewer bytes on the wire for the gradient reduction of every strategy.
//
// A compressed bucket is reduced in two phases over the data group, both in a fixed order so
// results are reproducible: each rank compresses its gradient chunk by chunk and sends chunk j
// to rank j, which decompresses the p contributions and sums them in rank order in the
// parameters' precision (f32 accumulation for f32 parameters); for an allreduce (DDP, ZeRO-1,
// hybrid, LocalSGD's averaging) each rank then compresses its reduced chunk once more and the
// chunks are allgathered, so every rank decodes the same values. ZeRO-2 and FSDP need only the
// first phase (a rank keeps only its own chunk).
//
// What is lost in compression is not dropped: with error feedback (on by default for the lossy
// methods) each rank keeps what its compressed chunks missed and adds it to the next step's
// gradient (1-bit Adam / ZeRO++ style; the owner of a reduced chunk keeps its own residual for
// the second phase), so training converges like uncompressed training. Residuals are part of
// checkpoints.
//
//   method     on the wire per element            error feedback
//   bf16/fp16  2 bytes                            no (rounding only)
//   int8       1 byte + a 4-byte scale per block  yes
//   int4       1/2 byte + a 4-byte scale per block yes
//   top_k      8 bytes (value, index) for the ratio of largest-magnitude elements of a chunk; yes
//   power_sgd  (rows + cols) x rank per matrix tensor (PowerSGD, warm-started Q); tensors not
//              declared as matrices (ParameterSet::add_matrix) or too small go uncompressed
#pragma once

#include <cstddef>
#include <cstdint>

namespace shardopt {

// Values are part of the C ABI (shardopt_compression) and of checkpoints: never renumber.
enum class GradientCompression : std::int32_t { none = 0, bf16 = 1, fp16 = 2, int8 = 3, int4 = 4, top_k = 5, power_sgd = 6 };
const char *compression_name(GradientCompression method) noexcept;

struct CompressionOptions {
    GradientCompression method = GradientCompression::none;
    // top_k: the fraction of each chunk's elements sent (AiDotNet's compressionRatio).
    double ratio = 0.1;
    // int8/int4: elements sharing one scale.
    int block_size = 256;
    // power_sgd: the rank of the approximation, and the smallest matrix (elements) worth it.
    int power_sgd_rank = 4;
    std::size_t power_sgd_min_elements = 4096;
    // Keep what compression missed and add it to the next step (ignored by bf16/fp16).
    bool error_feedback = true;

    bool enabled() const noexcept { return method != GradientCompression::none; }
    // Whether this method keeps error-feedback residuals.
    bool keeps_residuals() const noexcept {
        return error_feedback && (method == GradientCompression::int8 || method == GradientCompression::int4 ||
                                  method == GradientCompression::top_k || method == GradientCompression::power_sgd);
    }
};

} // namespace shardopt

// Splitting a global batch across data-parallel ranks.
//
// Rank r of R takes a contiguous slice of the batch (sizes differ by at most one). Each rank
// computes the mean gradient over its own slice; multiplied by the slice's weight
// (slice size * R / batch size), the average over ranks is exactly the mean gradient over the
// whole batch, whatever the split, so sharded training matches single-process training.
#pragma once

#include <cstdint>
#include <vector>

namespace shardopt {

struct BatchSlice {
    std::int64_t begin = 0, end = 0; // sample indices [begin, end)
    double weight = 0.0;             // multiply this rank's mean gradient (and loss) by it
    std::int64_t size() const { return end - begin; }
    std::vector<std::int64_t> indices() const; // begin, begin + 1, ..., end - 1
};

// The slice of the batch [first, first + count) that rank `rank` of `ranks` computes.
// Throws Error(invalid_argument) for a negative count or a rank out of range.
BatchSlice batch_slice(std::int64_t first, std::int64_t count, int rank, int ranks);

} // namespace shardopt

#include "shardopt/batch_split.hpp"

#include "shardopt/error.hpp"

namespace shardopt {

std::vector<std::int64_t> BatchSlice::indices() const {
    std::vector<std::int64_t> out;
    out.reserve(std::size_t(size()));
    for (std::int64_t i = begin; i < end; ++i) out.push_back(i);
    return out;
}

BatchSlice batch_slice(std::int64_t first, std::int64_t count, int rank, int ranks) {
    require(count >= 0, ErrorCode::invalid_argument, "batch_slice: negative batch size");
    require(ranks >= 1 && rank >= 0 && rank < ranks, ErrorCode::invalid_argument,
            "batch_slice: rank " + std::to_string(rank) + " out of range for " + std::to_string(ranks) + " ranks");
    BatchSlice s;
    s.begin = first + count * rank / ranks;
    s.end = first + count * (rank + 1) / ranks;
    // Written as every caller computed it before, so results stay bitwise the same.
    s.weight = count == 0 ? 0.0 : double(s.end - s.begin) * ranks / double(count);
    return s;
}

} // namespace shardopt

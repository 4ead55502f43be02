// The order in which an epoch of optimize() visits the samples: shared by every training loop
// (the step engine's, asynchronous SGD's), so they visit the same batches.
#pragma once

#include <cstdint>
#include <vector>

namespace shardopt::training {

// 0..n-1, or (shuffle) a Fisher-Yates permutation drawn from (seed, epoch) by a fixed, portable
// generator (splitmix64), the same on every rank, build and platform.
std::vector<std::int64_t> epoch_order(std::int64_t n, bool shuffle, std::uint64_t seed, int epoch);

} // namespace shardopt::training

#include "epoch_order.hpp"

#include <numeric>
#include <utility>

namespace shardopt::training {
namespace {

// splitmix64: std::shuffle's generator use is implementation-defined; this one is not.
std::uint64_t splitmix64(std::uint64_t &state) {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

} // namespace

std::vector<std::int64_t> epoch_order(std::int64_t n, bool shuffle, std::uint64_t seed, int epoch) {
    std::vector<std::int64_t> order(static_cast<std::size_t>(n));
    std::iota(order.begin(), order.end(), std::int64_t(0));
    if (!shuffle) return order;
    std::uint64_t state = seed ^ (0xd1b54a32d192ed03ull * std::uint64_t(epoch + 1));
    for (std::int64_t i = n - 1; i > 0; --i) {
        const std::int64_t j = std::int64_t(splitmix64(state) % std::uint64_t(i + 1));
        std::swap(order[std::size_t(i)], order[std::size_t(j)]);
    }
    return order;
}

} // namespace shardopt::training

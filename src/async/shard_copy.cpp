#include "shard_copy.hpp"

#include <cstring>

namespace shardopt::async {

void copy_shard_out(const ParameterSet &layout, int k, const unsigned char *full, unsigned char *shard) {
    const std::size_t elem = layout.element_size();
    for (const auto &b : layout.buckets())
        std::memcpy(shard + b.shard_offset * elem, full + (b.offset + std::size_t(k) * b.shard) * elem, b.shard * elem);
}

void copy_shard_in(const ParameterSet &layout, int k, const unsigned char *shard, unsigned char *full) {
    const std::size_t elem = layout.element_size();
    for (const auto &b : layout.buckets())
        std::memcpy(full + (b.offset + std::size_t(k) * b.shard) * elem, shard + b.shard_offset * elem, b.shard * elem);
}

} // namespace shardopt::async

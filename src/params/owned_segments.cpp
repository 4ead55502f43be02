#include "owned_segments.hpp"

#include <algorithm>
#include <cstring>

#include "aligned_buffer.hpp"

namespace shardopt {

std::vector<OwnedSegment> owned_chunks(const ParameterSet &layout, int group_rank) {
    std::vector<OwnedSegment> segments;
    for (const auto &b : layout.buckets()) {
        const std::size_t begin = b.offset + std::size_t(group_rank) * b.shard, end = begin + b.shard;
        for (int t = b.first_tensor; t < b.first_tensor + b.tensor_count; ++t) {
            const auto &tl = layout.tensor(t);
            const std::size_t lo = std::max(begin, tl.offset), hi = std::min(end, tl.offset + tl.count);
            if (lo < hi) segments.push_back({t, lo, b.shard_offset + (lo - begin), hi - lo});
        }
    }
    return segments;
}

std::vector<OwnedSegment> whole_tensors(const ParameterSet &layout) {
    std::vector<OwnedSegment> segments;
    for (int t = 0; t < layout.tensor_count(); ++t) {
        const auto &tl = layout.tensor(t);
        segments.push_back({t, tl.offset, tl.offset, tl.count});
    }
    return segments;
}

void gather_packed(const ParameterSet &layout, Communicator *shard, const unsigned char *base, void *packed_raw) {
    auto *packed = static_cast<unsigned char *>(packed_raw);
    const std::size_t elem = layout.element_size();
    AlignedBuffer unit;
    std::size_t out = 0;
    for (const auto &bl : layout.buckets()) {
        const unsigned char *full = base + bl.offset * elem;
        if (shard) {
            if (unit.size() < bl.padded * elem) unit.resize(layout.max_bucket_padded() * elem);
            shard->allgather(base + bl.shard_offset * elem, unit.data(), bl.shard, layout.dtype());
            full = unit.data();
        }
        std::memcpy(packed + out * elem, full, bl.count * elem);
        out += bl.count;
    }
}

} // namespace shardopt

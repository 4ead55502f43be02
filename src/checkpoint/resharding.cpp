#include "resharding.hpp"

#include <cstring>

#include "shardopt/error.hpp"

namespace shardopt::checkpoint {

SegmentIndex::SegmentIndex(LayoutInfo layout) : layout_(std::move(layout)), elem_(dtype_size(layout_.dtype)) {
    require(elem_ > 0, ErrorCode::corrupt, "checkpoint layout has an invalid dtype");
}

void SegmentIndex::add(std::shared_ptr<const ByteSource> source, std::shared_ptr<const Container> container,
                       const FileOpener &open) {
    for (const auto &r : container->segments) {
        const std::string where = source->name() + ": segment " + r.part + " of tensor " + std::to_string(r.tensor);
        const ByteSource *from = source.get();
        if (!r.file.empty()) {
            if (!open) throw Error(ErrorCode::corrupt, where + ": lies in file '" + r.file + "', which a serialized checkpoint cannot name");
            auto &file = files_[r.file];
            if (!file) file = open(r.file);
            from = file.get();
            if (r.data_offset > from->size() || r.bytes > from->size() - r.data_offset)
                throw Error(ErrorCode::corrupt, where + ": data range [" + std::to_string(r.data_offset) + ", +" +
                                                    std::to_string(r.bytes) + ") lies outside the " +
                                                    std::to_string(from->size()) + "-byte file '" + from->name() +
                                                    "' (truncated)");
        }
        if (r.part.rfind(kRankStatePrefix, 0) == 0) {
            if (r.tensor != 0 || r.offset != 0 || r.count != r.bytes)
                throw Error(ErrorCode::corrupt, where + ": a rank state segment must be tensor 0, offset 0, count = bytes");
            rank_states_[r.part] = Entry{from, container.get(), &r};
            continue;
        }
        if (r.tensor < 0 || std::size_t(r.tensor) >= layout_.tensors.size())
            throw Error(ErrorCode::corrupt, where + ": tensor index out of range (" +
                                                std::to_string(layout_.tensors.size()) + " tensors)");
        const std::uint64_t n = layout_.tensors[std::size_t(r.tensor)].count;
        if (r.count == 0 || r.offset > n || r.count > n - r.offset)
            throw Error(ErrorCode::corrupt, where + ": elements [" + std::to_string(r.offset) + ", +" +
                                                std::to_string(r.count) + ") outside the tensor's " + std::to_string(n));
        if (r.bytes != r.count * elem_) // count <= 2^48, no overflow
            throw Error(ErrorCode::corrupt, where + ": " + std::to_string(r.bytes) + " bytes for " +
                                                std::to_string(r.count) + " elements");
        entries_[{r.part, r.tensor}].push_back(Entry{from, container.get(), &r});
    }
    sources_.push_back(std::move(source));
    containers_.push_back(std::move(container));
}

std::vector<std::string> SegmentIndex::rank_state_parts() const {
    std::vector<std::string> parts;
    for (const auto &[part, entry] : rank_states_) parts.push_back(part);
    return parts;
}

bool SegmentIndex::read_rank_state(const std::string &part, std::vector<unsigned char> &out) const {
    const auto it = rank_states_.find(part);
    if (it == rank_states_.end()) return false;
    out.resize(std::size_t(it->second.record->bytes));
    read_segment(*it->second.source, *it->second.container, *it->second.record, out.data());
    return true;
}

void SegmentIndex::read(const std::string &part, int tensor, std::uint64_t offset, std::uint64_t count,
                        void *dst_raw) const {
    auto *dst = static_cast<unsigned char *>(dst_raw);
    // Element ranges still to fill, [lo, hi).
    std::vector<std::pair<std::uint64_t, std::uint64_t>> missing{{offset, offset + count}};
    const auto it = entries_.find({part, tensor});
    if (it != entries_.end()) {
        for (const Entry &e : it->second) {
            if (missing.empty()) break;
            const std::uint64_t slo = e.record->offset, shi = slo + e.record->count;
            bool loaded = false;
            std::vector<std::pair<std::uint64_t, std::uint64_t>> still;
            for (const auto &[lo, hi] : missing) {
                const std::uint64_t a = std::max(lo, slo), b = std::min(hi, shi);
                if (a >= b) {
                    still.push_back({lo, hi});
                    continue;
                }
                if (!loaded && cached_ != e.record) {
                    cached_ = nullptr;
                    scratch_.resize(std::size_t(e.record->bytes));
                    read_segment(*e.source, *e.container, *e.record, scratch_.data());
                    cached_ = e.record;
                }
                loaded = true;
                std::memcpy(dst + (a - offset) * elem_, scratch_.data() + (a - slo) * elem_, std::size_t(b - a) * elem_);
                if (lo < a) still.push_back({lo, a});
                if (b < hi) still.push_back({b, hi});
            }
            missing.swap(still);
        }
    }
    if (!missing.empty()) {
        const std::string name =
            tensor >= 0 && std::size_t(tensor) < layout_.tensors.size() ? layout_.tensors[std::size_t(tensor)].name : "?";
        throw Error(ErrorCode::corrupt, "checkpoint has no data for " + part + " of tensor '" + name + "' elements [" +
                                            std::to_string(missing.front().first) + ", " +
                                            std::to_string(missing.front().second) + ")");
    }
}

} // namespace shardopt::checkpoint

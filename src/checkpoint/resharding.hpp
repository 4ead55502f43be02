// Resharding: a checkpoint's segments indexed by (part, tensor) in the packed element space of
// each tensor, so a reader at any world size and strategy copies exactly the element ranges it
// owns, from whichever files hold them. Sources are added in order of preference; an element
// held by several (replicas, LocalSGD) comes from the first.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "container_format.hpp"
#include "manifest.hpp"

namespace shardopt::checkpoint {

class SegmentIndex {
  public:
    explicit SegmentIndex(LayoutInfo layout);

    // Opens a file a segment names (version 2: a plain name in the checkpoint's directory).
    using FileOpener = std::function<std::shared_ptr<const ByteSource>(const std::string &name)>;

    // Validates every record against the layout (tensor index, element range inside the
    // tensor, bytes = count * element size, inside its file; Error(corrupt) otherwise) and
    // indexes it. Segments in other files are read through `open` (each file opened once);
    // without it such a segment is refused (serialized bytes are self-contained).
    void add(std::shared_ptr<const ByteSource> source, std::shared_ptr<const Container> container,
             const FileOpener &open = {});

    // Copies elements [offset, offset+count) of `part` of tensor `tensor` into dst, checking
    // the checksum of every segment read. Error(corrupt) when a range is held by no segment.
    void read(const std::string &part, int tensor, std::uint64_t offset, std::uint64_t count, void *dst) const;

    // Rank state: opaque bytes one rank saved for itself (gradient compression's residuals),
    // segments whose part starts with kRankStatePrefix (tensor 0, offset 0, count = bytes).
    // Checksum-verified on read; false when the checkpoint holds none under that part.
    static constexpr const char *kRankStatePrefix = "rank_state.";
    bool read_rank_state(const std::string &part, std::vector<unsigned char> &out) const;
    // The rank state parts the checkpoint holds, in order.
    std::vector<std::string> rank_state_parts() const;

    const LayoutInfo &layout() const noexcept { return layout_; }

  private:
    struct Entry {
        const ByteSource *source;
        const Container *container;
        const SegmentRecord *record;
    };
    LayoutInfo layout_;
    std::size_t elem_;
    std::vector<std::shared_ptr<const ByteSource>> sources_;
    std::vector<std::shared_ptr<const Container>> containers_;
    std::map<std::string, std::shared_ptr<const ByteSource>> files_; // segments' own files, by name
    std::map<std::pair<std::string, int>, std::vector<Entry>> entries_;
    std::map<std::string, Entry> rank_states_;
    // The last segment read, kept: consecutive reads of one segment read it once.
    mutable std::vector<unsigned char> scratch_;
    mutable const SegmentRecord *cached_ = nullptr;
};

} // namespace shardopt::checkpoint

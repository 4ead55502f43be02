// The checkpoint container: every checkpoint file (manifest, shard, consolidated, serialized
// bytes) has the same frame.
//
//   offset  size  field
//   0       8     magic "SHRDCKPT"
//   8       4     format version (u32 LE): 1, or 2 when a segment lies in another file (below);
//                 newer versions are refused
//   12      4     flags (u32 LE), 0
//   16      8     header length H (u64 LE)
//   24      8     XXH3-64 of the header bytes (u64 LE)
//   32      H     header: UTF-8 JSON object (see manifest.hpp for its fields)
//   32+H    D     data: the segments' raw little-endian elements, back to back
//
// The header's "segments" array describes the data: each entry names a part ("param",
// "state.0", ...), a tensor index, an element range [offset, offset+count) in that tensor's
// packed elements, where its bytes lie (data_offset relative to the data area, bytes) and the
// XXH3-64 of those bytes (hex). "data_bytes" in the header must equal D: a truncated or
// extended file is refused. Version 2: a segment with a "file" field lies in that file of the
// same directory instead (a plain name), data_offset counted from the file's start: the
// consolidated checkpoint's parameters are its model.<generation>.safetensors' data, stored once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "byte_io.hpp"

namespace shardopt::checkpoint {

inline constexpr char kMagic[8] = {'S', 'H', 'R', 'D', 'C', 'K', 'P', 'T'};
inline constexpr std::uint32_t kFormatVersion = 2; // the newest read; 1 is written unless a segment lies elsewhere
inline constexpr std::size_t kPreambleBytes = 32;
inline constexpr std::uint64_t kMaxHeaderBytes = std::uint64_t(256) << 20; // refuse larger headers

struct SegmentRecord {
    std::string part;        // "param" or "state.<k>"
    int tensor = 0;          // index into the layout
    std::uint64_t offset = 0; // first element inside the tensor
    std::uint64_t count = 0;  // elements
    std::uint64_t data_offset = 0;
    std::uint64_t bytes = 0;
    std::uint64_t xxh3 = 0;
    std::string file; // empty: in the data area; else the file of this directory holding it (version 2)
};

// Whether `name` may be a segment's file: a plain name in the checkpoint's directory.
bool is_segment_file_name(const std::string &name);

// A segment to write: its description and where its bytes are now.
struct SegmentData {
    std::string part;
    int tensor = 0;
    std::uint64_t offset = 0, count = 0;
    const void *data = nullptr;
    std::size_t bytes = 0;
};

std::string hex64(std::uint64_t v);
std::uint64_t xxh3(const void *data, std::size_t n);

// The preamble and header of a container whose segments are `records` (data_offset, bytes and
// xxh3 as given), data_bytes long: what comes before the data. With every xxh3 = 0 it has the
// length it will have with the real checksums (fixed-width hex), so writers can place the data
// before the checksums are known.
std::string container_head(nlohmann::json header, const std::vector<SegmentRecord> &records, std::uint64_t data_bytes);

// Writes one container: header (the caller's fields plus "segments" and "data_bytes") then the
// segments' bytes. Returns the XXH3 of the header written.
std::uint64_t write_container(ByteSink &sink, nlohmann::json header, const std::vector<SegmentData> &segments);

struct Container {
    std::uint32_t version = 1;
    nlohmann::json header;
    std::uint64_t header_xxh3 = 0;
    std::uint64_t data_start = 0;
    std::uint64_t data_bytes = 0;
    std::vector<SegmentRecord> segments;
};

// Reads and validates the frame and the header (magic, version, sizes against the source's
// size, header checksum, JSON, segment records within the data area). Segment element ranges
// are checked against the layout later (resharding), data checksums when a segment is read.
// Throws Error(corrupt) naming what is wrong.
Container read_container(const ByteSource &source);

// Reads one segment's bytes into dst (record.bytes long) and checks its checksum; `source` is the
// container's, or for a segment in another file, that file's.
void read_segment(const ByteSource &source, const Container &container, const SegmentRecord &record, void *dst);

} // namespace shardopt::checkpoint

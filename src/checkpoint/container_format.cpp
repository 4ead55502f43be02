#include "container_format.hpp"

#include <cstdio>
#include <cstring>

#include <xxhash.h>

#include "shardopt/error.hpp"

namespace shardopt::checkpoint {

std::string hex64(std::uint64_t v) {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
    return buf;
}

std::uint64_t xxh3(const void *data, std::size_t n) { return XXH3_64bits(data, n); }

namespace {

bool parse_hex64(const std::string &s, std::uint64_t &out) {
    if (s.size() != 16) return false;
    out = 0;
    for (char c : s) {
        int d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else return false;
        out = (out << 4) | std::uint64_t(d);
    }
    return true;
}

[[noreturn]] void corrupt(const ByteSource &source, const std::string &what) {
    throw Error(ErrorCode::corrupt, source.name() + ": " + what);
}

std::uint64_t get_uint(const ByteSource &source, const nlohmann::json &j, const char *key, const std::string &where) {
    const auto it = j.find(key);
    if (it == j.end() || !it->is_number_unsigned())
        corrupt(source, where + ": field '" + key + "' missing or not a non-negative integer");
    return it->get<std::uint64_t>();
}

} // namespace

std::string container_head(nlohmann::json header, const std::vector<SegmentRecord> &records, std::uint64_t data_bytes) {
    nlohmann::json list = nlohmann::json::array();
    std::uint32_t version = 1;
    for (const auto &r : records) {
        list.push_back({{"part", r.part},
                        {"tensor", r.tensor},
                        {"offset", r.offset},
                        {"count", r.count},
                        {"data_offset", r.data_offset},
                        {"bytes", r.bytes},
                        {"xxh3", hex64(r.xxh3)}});
        if (!r.file.empty()) {
            list.back()["file"] = r.file;
            version = 2;
        }
    }
    header["segments"] = std::move(list);
    header["data_bytes"] = data_bytes;
    const std::string text = header.dump();
    std::string out(kPreambleBytes, '\0');
    auto *pre = reinterpret_cast<unsigned char *>(out.data());
    std::memcpy(pre, kMagic, 8);
    put_u32(pre + 8, version);
    put_u32(pre + 12, 0);
    put_u64(pre + 16, text.size());
    put_u64(pre + 24, xxh3(text.data(), text.size()));
    return out + text;
}

std::uint64_t write_container(ByteSink &sink, nlohmann::json header, const std::vector<SegmentData> &segments) {
    std::vector<SegmentRecord> records;
    std::uint64_t data_offset = 0;
    for (const auto &s : segments) {
        records.push_back({s.part, s.tensor, s.offset, s.count, data_offset, std::uint64_t(s.bytes), xxh3(s.data, s.bytes), {}});
        data_offset += s.bytes;
    }
    const std::string head = container_head(std::move(header), records, data_offset);
    sink.write(head.data(), head.size());
    for (const auto &s : segments) sink.write(s.data, s.bytes);
    return get_u64(reinterpret_cast<const unsigned char *>(head.data()) + 24);
}

Container read_container(const ByteSource &source) {
    Container c;
    const std::uint64_t size = source.size();
    if (size < kPreambleBytes)
        corrupt(source, "truncated: " + std::to_string(size) + " bytes, shorter than the " +
                            std::to_string(kPreambleBytes) + "-byte checkpoint preamble");
    unsigned char pre[kPreambleBytes];
    source.read(0, pre, sizeof pre);
    if (std::memcmp(pre, kMagic, 8) != 0) corrupt(source, "not a shardopt checkpoint (wrong magic bytes)");
    const std::uint32_t version = get_u32(pre + 8);
    if (version == 0 || version > kFormatVersion)
        corrupt(source, "checkpoint format version " + std::to_string(version) + " is not supported (this build reads " +
                            "versions 1.." + std::to_string(kFormatVersion) + ")");
    c.version = version;
    const std::uint32_t flags = get_u32(pre + 12);
    if (flags != 0) corrupt(source, "unknown flags " + std::to_string(flags));
    const std::uint64_t header_len = get_u64(pre + 16);
    c.header_xxh3 = get_u64(pre + 24);
    // Sizes are checked against the file before anything is allocated.
    if (header_len > size - kPreambleBytes)
        corrupt(source, "truncated: header of " + std::to_string(header_len) + " bytes declared but only " +
                            std::to_string(size - kPreambleBytes) + " bytes follow the preamble");
    if (header_len > kMaxHeaderBytes)
        corrupt(source, "header of " + std::to_string(header_len) + " bytes exceeds the limit of " +
                            std::to_string(kMaxHeaderBytes));
    std::string text(std::size_t(header_len), '\0');
    source.read(kPreambleBytes, text.data(), text.size());
    if (xxh3(text.data(), text.size()) != c.header_xxh3) corrupt(source, "header checksum mismatch (the header is damaged)");
    try {
        c.header = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception &e) {
        corrupt(source, std::string("header is not valid JSON: ") + e.what());
    }
    if (!c.header.is_object()) corrupt(source, "header is not a JSON object");
    c.data_start = kPreambleBytes + header_len;
    c.data_bytes = get_uint(source, c.header, "data_bytes", "header");
    if (c.data_bytes != size - c.data_start)
        corrupt(source, (c.data_bytes > size - c.data_start ? "truncated: " : "trailing bytes: ") + std::string("header declares ") +
                            std::to_string(c.data_bytes) + " data bytes but the file holds " +
                            std::to_string(size - c.data_start));
    const auto it = c.header.find("segments");
    if (it == c.header.end() || !it->is_array()) corrupt(source, "header has no 'segments' array");
    c.segments.reserve(std::min<std::size_t>(it->size(), 1u << 20));
    for (std::size_t i = 0; i < it->size(); ++i) {
        const auto &j = (*it)[i];
        const std::string where = "segment " + std::to_string(i);
        if (!j.is_object()) corrupt(source, where + " is not an object");
        SegmentRecord r;
        const auto part = j.find("part");
        if (part == j.end() || !part->is_string()) corrupt(source, where + ": field 'part' missing or not a string");
        r.part = part->get<std::string>();
        const std::uint64_t tensor = get_uint(source, j, "tensor", where);
        if (tensor > std::uint64_t(1) << 30) corrupt(source, where + ": tensor index " + std::to_string(tensor) + " out of range");
        r.tensor = int(tensor);
        r.offset = get_uint(source, j, "offset", where);
        r.count = get_uint(source, j, "count", where);
        r.data_offset = get_uint(source, j, "data_offset", where);
        r.bytes = get_uint(source, j, "bytes", where);
        if (const auto file = j.find("file"); file != j.end()) {
            if (version < 2) corrupt(source, where + ": field 'file' in a version 1 checkpoint");
            if (!file->is_string() || !is_segment_file_name(file->get<std::string>()))
                corrupt(source, where + ": field 'file' is not a plain file name");
            r.file = file->get<std::string>();
            if (r.bytes > ~std::uint64_t(0) - r.data_offset)
                corrupt(source, where + ": data range [" + std::to_string(r.data_offset) + ", +" + std::to_string(r.bytes) +
                                    ") lies outside the file '" + r.file + "'");
        } else if (r.data_offset > c.data_bytes || r.bytes > c.data_bytes - r.data_offset)
            corrupt(source, where + ": data range [" + std::to_string(r.data_offset) + ", +" + std::to_string(r.bytes) +
                                ") lies outside the " + std::to_string(c.data_bytes) + "-byte data area");
        const auto sum = j.find("xxh3");
        if (sum == j.end() || !sum->is_string() || !parse_hex64(sum->get<std::string>(), r.xxh3))
            corrupt(source, where + ": field 'xxh3' missing or not 16 lowercase hex digits");
        c.segments.push_back(std::move(r));
    }
    return c;
}

bool is_segment_file_name(const std::string &name) {
    if (name.empty() || name.size() > 255 || name[0] == '.') return false;
    for (char c : name)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
            return false;
    return true;
}

void read_segment(const ByteSource &source, const Container &container, const SegmentRecord &record, void *dst) {
    source.read((record.file.empty() ? container.data_start : 0) + record.data_offset, dst, std::size_t(record.bytes));
    if (xxh3(dst, std::size_t(record.bytes)) != record.xxh3)
        corrupt(source, "checksum mismatch in " + record.part + " of tensor " + std::to_string(record.tensor) +
                            " elements [" + std::to_string(record.offset) + ", " +
                            std::to_string(record.offset + record.count) + ") (the data is damaged)");
}

} // namespace shardopt::checkpoint

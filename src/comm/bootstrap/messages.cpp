#include "messages.hpp"

#include "../../little_endian.hpp"
#include "shardopt/error.hpp"

namespace shardopt::bootstrap {
namespace {

void require_done(const Reader &r, const char *what) {
    require(r.done(), ErrorCode::corrupt, std::string("bootstrap: trailing bytes after a ") + what + " message");
}

} // namespace

void encode_header(std::uint8_t out[kFrameHeaderBytes], FrameType type, std::uint32_t length) {
    put_u32(out, kFrameMagic);
    put_u16(out + 4, kProtocolVersion);
    put_u16(out + 6, std::uint16_t(type));
    put_u32(out + 8, length);
}

FrameHeader decode_header(const std::uint8_t in[kFrameHeaderBytes], std::uint32_t max_payload) {
    require(get_u32(in) == kFrameMagic, ErrorCode::corrupt,
            "bootstrap: bad frame magic (not a shardopt rendezvous peer?)");
    FrameHeader h;
    h.version = get_u16(in + 4);
    require(h.version == kProtocolVersion, ErrorCode::corrupt,
            "bootstrap: protocol version " + std::to_string(h.version) + ", expected " +
                std::to_string(kProtocolVersion) + " (mixed shardopt versions in one job?)");
    const std::uint16_t type = get_u16(in + 6);
    require(type >= std::uint16_t(FrameType::join) && type <= std::uint16_t(FrameType::bye), ErrorCode::corrupt,
            "bootstrap: unknown frame type " + std::to_string(type));
    h.type = FrameType(type);
    h.length = get_u32(in + 8);
    require(h.length <= max_payload && h.length <= kMaxFrameBytes, ErrorCode::corrupt,
            "bootstrap: frame of " + std::to_string(h.length) + " bytes exceeds the limit of " +
                std::to_string(std::min(max_payload, kMaxFrameBytes)));
    return h;
}

std::vector<std::uint8_t> encode_join(const JoinRequest &join) {
    Writer w;
    w.u32(join.world_size);
    w.u32(join.rank);
    w.str(join.token);
    w.bytes(join.blob);
    return w.take();
}

JoinRequest parse_join(const std::vector<std::uint8_t> &payload) {
    Reader r(payload);
    JoinRequest j;
    j.world_size = r.u32();
    j.rank = r.u32();
    j.token = r.str(kMaxTokenBytes);
    j.blob = r.bytes(kMaxJoinBytes);
    require_done(r, "join");
    return j;
}

std::vector<std::uint8_t> encode_welcome(const std::vector<std::vector<std::uint8_t>> &blobs) {
    Writer w;
    w.u32(std::uint32_t(blobs.size()));
    for (const auto &b : blobs) w.bytes(b);
    return w.take();
}

std::vector<std::vector<std::uint8_t>> parse_welcome(const std::vector<std::uint8_t> &payload,
                                                     std::uint32_t expected_ranks) {
    Reader r(payload);
    const std::uint32_t n = r.u32();
    require(n == expected_ranks && n <= kMaxWorldSize, ErrorCode::corrupt,
            "bootstrap: master sent " + std::to_string(n) + " addresses, expected " + std::to_string(expected_ranks));
    // Each blob costs at least its 4-byte length: a count the payload cannot hold is refused
    // before the vector of blobs is allocated.
    require(payload.size() - 4 >= std::size_t(n) * 4, ErrorCode::corrupt, "bootstrap: truncated welcome message");
    std::vector<std::vector<std::uint8_t>> blobs(n);
    for (auto &b : blobs) b = r.bytes(kMaxJoinBytes);
    require_done(r, "welcome");
    return blobs;
}

std::vector<std::uint8_t> encode_refuse(const std::string &reason) {
    Writer w;
    w.str(reason);
    return w.take();
}

std::string parse_refuse(const std::vector<std::uint8_t> &payload) {
    Reader r(payload);
    std::string s = r.str(64 * 1024);
    require_done(r, "refuse");
    return s;
}

} // namespace shardopt::bootstrap

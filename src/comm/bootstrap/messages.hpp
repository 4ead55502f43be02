// The rendezvous messages (payloads of JOIN, WELCOME and REFUSE frames) and the validation of
// a frame header, as pure functions of bytes: what the rendezvous uses on its sockets and what
// tests/fuzz/fuzz_rendezvous_frames.cpp feeds with arbitrary input. Every parser bounds each
// length by the bytes actually present (and by the limits below) before allocating, and
// throws Error(corrupt) on anything malformed: short, trailing bytes, unknown type/version.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "frame.hpp"

namespace shardopt::bootstrap {

constexpr std::size_t kFrameHeaderBytes = 12;
// Limits on what a joining rank may send rank 0 (a UCX worker address is a few hundred bytes).
constexpr std::uint32_t kMaxJoinBytes = 1u << 20;
constexpr std::uint32_t kMaxTokenBytes = 4096;
constexpr std::uint32_t kMaxWorldSize = 1u << 20;

struct FrameHeader {
    std::uint16_t version = 0;
    FrameType type = FrameType::refuse;
    std::uint32_t length = 0;
};

void encode_header(std::uint8_t out[kFrameHeaderBytes], FrameType type, std::uint32_t length);
// Checks magic, version, type and length <= max_payload; throws Error(corrupt) saying which.
FrameHeader decode_header(const std::uint8_t in[kFrameHeaderBytes], std::uint32_t max_payload);

struct JoinRequest {
    std::uint32_t world_size = 0;
    std::uint32_t rank = 0;
    std::string token;
    std::vector<std::uint8_t> blob;
};
std::vector<std::uint8_t> encode_join(const JoinRequest &join);
JoinRequest parse_join(const std::vector<std::uint8_t> &payload);

std::vector<std::uint8_t> encode_welcome(const std::vector<std::vector<std::uint8_t>> &blobs);
// The blobs of every rank; refuses a count other than expected_ranks before allocating.
std::vector<std::vector<std::uint8_t>> parse_welcome(const std::vector<std::uint8_t> &payload,
                                                     std::uint32_t expected_ranks);

std::vector<std::uint8_t> encode_refuse(const std::string &reason);
std::string parse_refuse(const std::vector<std::uint8_t> &payload);

} // namespace shardopt::bootstrap

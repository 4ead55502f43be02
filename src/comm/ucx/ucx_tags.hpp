// The 64-bit UCP tag layout. Receives match the full tag (UCX has no source filter, so the
// sender's rank is part of it):
//
//   63        44 43   41 40        25 24                   0
//   [ context  ][ class ][ src rank  ][ class-specific      ]
//
// context: one id per communicator, agreed at split() time, so children, parents and their
// leftovers after an abort never match each other's messages. class-specific bits: for
// collective data, the sequence number (13 bits) and the step within the collective (12 bits);
// for headers, the sequence number; for point to point, the user's tag. UCX matches messages
// with equal tags from one sender in send order, so the wrap-around of these fields is safe.
#pragma once

#include <cstdint>

namespace shardopt::ucx {

enum class TagClass : std::uint64_t { data = 0, header = 1, p2p_header = 2, p2p_data = 3, control = 4 };

constexpr int kContextBits = 20;
constexpr int kSourceBits = 16;
constexpr int kLowBits = 25;
constexpr std::uint64_t kMaxContext = (std::uint64_t(1) << kContextBits) - 1;
constexpr int kMaxRanks = 1 << kSourceBits;
constexpr std::int64_t kMaxUserTag = (std::int64_t(1) << kLowBits) - 1;
constexpr std::uint64_t kFullMask = ~std::uint64_t(0);
constexpr std::uint64_t kLowMask = (std::uint64_t(1) << kLowBits) - 1;

constexpr std::uint64_t make_tag(std::uint32_t context, TagClass cls, int src, std::uint64_t low) {
    return (std::uint64_t(context) << 44) | (std::uint64_t(cls) << 41) |
           (std::uint64_t(std::uint32_t(src) & 0xffffu) << 25) | (low & kLowMask);
}

// Data of collective `seq`, step `step` (both wrap).
constexpr std::uint64_t data_tag(std::uint32_t context, int src, std::uint64_t seq, std::uint64_t step) {
    return make_tag(context, TagClass::data, src, ((seq & 0x1fff) << 12) | (step & 0xfff));
}

// Mask that ignores the source rank (control messages from anyone).
constexpr std::uint64_t kAnySourceMask = ~(std::uint64_t(0xffff) << 25);

} // namespace shardopt::ucx

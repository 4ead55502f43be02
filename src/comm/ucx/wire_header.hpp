// WireHeader: what each rank announces about a collective before any data moves (sequence
// number, kind, count, dtype, op, root), sent over UCX or written into the shared-memory arena.
#pragma once

#include <cstdint>

namespace shardopt::ucx {

struct WireHeader {
    std::uint32_t magic = 0x52484453; // "SHDR"
    std::uint32_t kind = 0;
    std::uint64_t seq = 0;
    std::uint64_t count = 0;
    std::int32_t dtype = 0, op = 0, root = 0, tag = 0;
    std::uint32_t context_proposal = 0, reserved = 0;
    std::uint64_t fingerprint = 0; // 0: fingerprint checks off on the sender
};

} // namespace shardopt::ucx

// libFuzzer harness: the rendezvous wire format. The input is treated (1) as the bytes a peer
// sends on a rendezvous connection — frames are read through recv_frame from a socketpair, each
// payload parsed as what its type says — and (2) directly as JOIN/WELCOME/REFUSE payloads. Any
// outcome but a value or Error(corrupt / peer_lost / timeout) is a bug, as is a crash, a leak
// or an allocation larger than the bounds (ASan's allocation limit catches those).
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <vector>

#include "comm/bootstrap/frame.hpp"
#include "comm/bootstrap/messages.hpp"
#include "shardopt/error.hpp"

using namespace shardopt;
using namespace shardopt::bootstrap;

namespace {

void check_code(const Error &e) {
    if (e.code() != ErrorCode::corrupt && e.code() != ErrorCode::peer_lost && e.code() != ErrorCode::timeout)
        std::abort();
}

void parse_payload(FrameType type, const std::vector<std::uint8_t> &p, std::uint32_t ranks) {
    try {
        switch (type) {
        case FrameType::join: {
            JoinRequest j = parse_join(p);
            if (j.token.size() > kMaxTokenBytes || j.blob.size() > kMaxJoinBytes) std::abort();
            if (parse_join(encode_join(j)).blob != j.blob) std::abort(); // round trip
            break;
        }
        case FrameType::welcome: {
            auto blobs = parse_welcome(p, ranks);
            if (blobs.size() != ranks) std::abort();
            break;
        }
        case FrameType::refuse: parse_refuse(p); break;
        }
    } catch (const Error &e) {
        check_code(e);
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
    const std::uint32_t ranks = size ? 1u + data[0] % 8 : 1;
    const std::vector<std::uint8_t> all(data, data + size);
    for (FrameType t : {FrameType::join, FrameType::welcome, FrameType::refuse}) parse_payload(t, all, ranks);

    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return 0;
    Socket reader(fds[0]), writer(fds[1]);
    int buf = 1 << 20;
    ::setsockopt(writer.fd(), SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
    std::size_t off = 0;
    while (off < size) { // inputs are small (-max_len), the socket buffer holds them
        const ssize_t w = ::send(writer.fd(), data + off, size - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w <= 0) break;
        off += std::size_t(w);
    }
    ::shutdown(writer.fd(), SHUT_WR);
    for (int frames = 0; frames < 64; ++frames) {
        Frame f;
        try {
            if (!recv_frame(reader, f, Clock::now() + std::chrono::milliseconds(50), kMaxJoinBytes)) break;
        } catch (const Error &e) {
            check_code(e);
            break;
        }
        if (f.payload.size() > kMaxJoinBytes) std::abort();
        parse_payload(f.type, f.payload, ranks);
    }
    return 0;
}

// Framing for the bootstrap TCP protocol: every message is a 12-byte header (magic "SHRD",
// protocol version, frame type, payload length; all little-endian) followed by the payload.
// Payloads longer than kMaxFrameBytes or with a wrong magic/version are refused as corrupt
// before anything is allocated. Socket helpers here take an absolute deadline.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace shardopt::bootstrap {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

constexpr std::uint32_t kFrameMagic = 0x44524853; // "SHRD" read as little-endian u32
constexpr std::uint16_t kProtocolVersion = 2; // 2: connections stay open as the liveness channel
constexpr std::uint32_t kMaxFrameBytes = 16u << 20;

// lost/bye travel on the liveness channel (liveness.hpp) after the rendezvous.
enum class FrameType : std::uint16_t { join = 1, welcome = 2, refuse = 3, lost = 4, bye = 5 };

struct Frame {
    FrameType type = FrameType::refuse;
    std::vector<std::uint8_t> payload;
};

// A file descriptor closed on destruction.
class Socket {
  public:
    Socket() = default;
    explicit Socket(int fd) : fd_(fd) {}
    ~Socket();
    Socket(Socket &&other) noexcept : fd_(other.release()) {}
    Socket &operator=(Socket &&other) noexcept;
    Socket(const Socket &) = delete;
    Socket &operator=(const Socket &) = delete;
    int fd() const { return fd_; }
    int release() {
        int fd = fd_;
        fd_ = -1;
        return fd;
    }
    explicit operator bool() const { return fd_ >= 0; }

  private:
    int fd_ = -1;
};

// Listening socket on addr:port (SO_REUSEADDR). Throws Error(io) naming the address, with a
// dedicated message when the port is already in use.
Socket listen_on(const std::string &addr, int port);
// Accepted connection, or an empty Socket when the deadline passes first.
Socket accept_until(const Socket &listener, Deadline deadline, std::string *peer = nullptr);
// Connects, retrying (refused, unreachable, ...) with a bounded backoff until the deadline;
// throws Error(timeout) naming the address and the last error.
Socket connect_until(const std::string &addr, int port, Deadline deadline);

// Whole-frame I/O. send_frame throws Error(io) on failure or deadline. recv_frame returns
// false when the deadline passes, throws Error(peer_lost) on EOF and Error(corrupt) on a bad
// header or oversized length.
// max_payload bounds the length a peer may announce (checked before allocating).
void send_frame(const Socket &s, FrameType type, const std::vector<std::uint8_t> &payload, Deadline deadline);
bool recv_frame(const Socket &s, Frame &frame, Deadline deadline, std::uint32_t max_payload = kMaxFrameBytes);
// Takes one whole frame off the front of `buf` (bytes read so far) when it holds one; throws
// Error(corrupt) on a bad header or a length above max_payload, like recv_frame (as soon as the
// header is in, so nothing larger is ever buffered).
bool pop_frame(std::vector<std::uint8_t> &buf, Frame &frame, std::uint32_t max_payload = kMaxFrameBytes);

// Little-endian payload building and parsing; Reader throws Error(corrupt) when short.
class Writer {
  public:
    void u32(std::uint32_t v);
    void bytes(const std::vector<std::uint8_t> &b); // u32 length + bytes
    void str(const std::string &s);
    std::vector<std::uint8_t> take() { return std::move(buf_); }

  private:
    std::vector<std::uint8_t> buf_;
};

class Reader {
  public:
    explicit Reader(const std::vector<std::uint8_t> &buf) : buf_(buf) {}
    std::uint32_t u32();
    // A length-prefixed field; a length above `max` or past the end is corrupt.
    std::vector<std::uint8_t> bytes(std::uint32_t max = kMaxFrameBytes);
    std::string str(std::uint32_t max = kMaxFrameBytes);
    bool done() const { return pos_ == buf_.size(); }

  private:
    void need(std::size_t n) const;
    const std::vector<std::uint8_t> &buf_;
    std::size_t pos_ = 0;
};

// Constant-time equality for secrets (time depends only on the lengths).
bool constant_time_equal(const std::string &a, const std::string &b);

} // namespace shardopt::bootstrap

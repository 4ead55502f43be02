#include "frame.hpp"
#include "messages.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "../../little_endian.hpp"
#include "shardopt/error.hpp"

namespace shardopt::bootstrap {
namespace {

int ms_until(Deadline deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return int(std::max<long long>(0, std::min<long long>(left, 1000)));
}

std::string endpoint(const std::string &addr, int port) { return addr + ":" + std::to_string(port); }

struct AddrInfo {
    addrinfo *list = nullptr;
    ~AddrInfo() {
        if (list) freeaddrinfo(list);
    }
};

void resolve(const std::string &addr, int port, bool passive, AddrInfo &out) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (passive) hints.ai_flags = AI_PASSIVE;
    const std::string service = std::to_string(port);
    const int rc = getaddrinfo(addr.empty() ? nullptr : addr.c_str(), service.c_str(), &hints, &out.list);
    require(rc == 0, ErrorCode::invalid_argument,
            "bootstrap: cannot resolve '" + addr + "': " + gai_strerror(rc));
}

void set_nonblocking(int fd, bool on) {
    int flags = fcntl(fd, F_GETFL, 0);
    fcntl(fd, F_SETFL, on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK));
}

// Waits until fd is readable/writable; false at the deadline.
bool wait_fd(int fd, short events, Deadline deadline) {
    for (;;) {
        pollfd p{fd, events, 0};
        const int rc = poll(&p, 1, ms_until(deadline));
        if (rc > 0) return true;
        if (rc < 0 && errno != EINTR) return true; // let the following I/O report the error
        if (Clock::now() >= deadline) return false;
    }
}

void write_all(const Socket &s, const std::uint8_t *data, std::size_t n, Deadline deadline) {
    while (n > 0) {
        const ssize_t w = ::send(s.fd(), data, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            data += w;
            n -= std::size_t(w);
            continue;
        }
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            require(wait_fd(s.fd(), POLLOUT, deadline), ErrorCode::timeout, "bootstrap: send timed out");
            continue;
        }
        throw Error(ErrorCode::io, std::string("bootstrap: send failed: ") + std::strerror(errno));
    }
}

// false at the deadline; throws peer_lost on EOF.
bool read_all(const Socket &s, std::uint8_t *data, std::size_t n, Deadline deadline) {
    while (n > 0) {
        const ssize_t r = ::recv(s.fd(), data, n, MSG_DONTWAIT);
        if (r > 0) {
            data += r;
            n -= std::size_t(r);
            continue;
        }
        if (r == 0) throw Error(ErrorCode::peer_lost, "bootstrap: connection closed by peer");
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
            if (!wait_fd(s.fd(), POLLIN, deadline)) return false;
            continue;
        }
        throw Error(ErrorCode::peer_lost, std::string("bootstrap: receive failed: ") + std::strerror(errno));
    }
    return true;
}

} // namespace

Socket::~Socket() {
    if (fd_ >= 0) ::close(fd_);
}

Socket &Socket::operator=(Socket &&other) noexcept {
    if (this != &other) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = other.release();
    }
    return *this;
}

Socket listen_on(const std::string &addr, int port) {
    AddrInfo ai;
    resolve(addr, port, true, ai);
    int last_errno = 0;
    for (addrinfo *p = ai.list; p; p = p->ai_next) {
        Socket s(::socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC, p->ai_protocol));
        if (!s) {
            last_errno = errno;
            continue;
        }
        int one = 1;
        setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (::bind(s.fd(), p->ai_addr, p->ai_addrlen) != 0) {
            last_errno = errno;
            continue;
        }
        if (::listen(s.fd(), 1024) != 0) {
            last_errno = errno;
            continue;
        }
        set_nonblocking(s.fd(), true);
        return s;
    }
    if (last_errno == EADDRINUSE)
        throw Error(ErrorCode::io, "bootstrap: rendezvous port " + endpoint(addr, port) +
                                       " is already in use (another job or a stale process holds it; "
                                       "pick another SHARDOPT_MASTER_PORT)");
    throw Error(ErrorCode::io, "bootstrap: cannot listen on " + endpoint(addr, port) + ": " +
                                   std::strerror(last_errno));
}

Socket accept_until(const Socket &listener, Deadline deadline, std::string *peer) {
    for (;;) {
        sockaddr_storage ss{};
        socklen_t len = sizeof ss;
        int fd = ::accept4(listener.fd(), reinterpret_cast<sockaddr *>(&ss), &len, SOCK_CLOEXEC);
        if (fd >= 0) {
            set_nonblocking(fd, false);
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            if (peer) {
                char host[NI_MAXHOST] = "?", serv[NI_MAXSERV] = "?";
                getnameinfo(reinterpret_cast<sockaddr *>(&ss), len, host, sizeof host, serv, sizeof serv,
                            NI_NUMERICHOST | NI_NUMERICSERV);
                *peer = std::string(host) + ":" + serv;
            }
            return Socket(fd);
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
            throw Error(ErrorCode::io, std::string("bootstrap: accept failed: ") + std::strerror(errno));
        if (!wait_fd(listener.fd(), POLLIN, deadline)) return Socket();
    }
}

Socket connect_until(const std::string &addr, int port, Deadline deadline) {
    std::string last_error = "no attempt";
    auto backoff = std::chrono::milliseconds(10);
    for (;;) {
        AddrInfo ai;
        try {
            resolve(addr, port, false, ai);
        } catch (const Error &e) {
            last_error = e.what();
        }
        for (addrinfo *p = ai.list; p; p = p->ai_next) {
            Socket s(::socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC, p->ai_protocol));
            if (!s) continue;
            set_nonblocking(s.fd(), true);
            int rc = ::connect(s.fd(), p->ai_addr, p->ai_addrlen);
            if (rc != 0 && errno == EINPROGRESS) {
                if (wait_fd(s.fd(), POLLOUT, std::min(deadline, Clock::now() + std::chrono::seconds(2)))) {
                    int err = 0;
                    socklen_t len = sizeof err;
                    getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len);
                    rc = err ? -1 : 0;
                    errno = err;
                } else {
                    errno = ETIMEDOUT;
                }
            }
            if (rc == 0) {
                set_nonblocking(s.fd(), false);
                int one = 1;
                setsockopt(s.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                return s;
            }
            last_error = std::strerror(errno);
        }
        const auto now = Clock::now();
        if (now >= deadline) break;
        std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - now));
        backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
    }
    throw Error(ErrorCode::timeout, "bootstrap: rendezvous master " + endpoint(addr, port) +
                                        " unreachable within the timeout (last error: " + last_error +
                                        "); is rank 0 running and SHARDOPT_MASTER_ADDR/PORT right?");
}

void send_frame(const Socket &s, FrameType type, const std::vector<std::uint8_t> &payload, Deadline deadline) {
    require(payload.size() <= kMaxFrameBytes, ErrorCode::invalid_argument, "bootstrap: frame too large");
    std::uint8_t header[kFrameHeaderBytes];
    encode_header(header, type, std::uint32_t(payload.size()));
    write_all(s, header, sizeof header, deadline);
    if (!payload.empty()) write_all(s, payload.data(), payload.size(), deadline);
}

bool recv_frame(const Socket &s, Frame &frame, Deadline deadline, std::uint32_t max_payload) {
    std::uint8_t header[kFrameHeaderBytes];
    if (!read_all(s, header, sizeof header, deadline)) return false;
    const FrameHeader h = decode_header(header, max_payload); // bounded before allocating
    const std::uint32_t length = h.length;
    frame.type = h.type;
    frame.payload.assign(length, 0);
    if (length && !read_all(s, frame.payload.data(), length, deadline)) return false;
    return true;
}

bool pop_frame(std::vector<std::uint8_t> &buf, Frame &frame, std::uint32_t max_payload) {
    if (buf.size() < kFrameHeaderBytes) return false;
    const FrameHeader h = decode_header(buf.data(), max_payload); // same checks as recv_frame
    if (buf.size() < kFrameHeaderBytes + std::size_t(h.length)) return false;
    frame.type = h.type;
    const auto payload = buf.begin() + long(kFrameHeaderBytes);
    frame.payload.assign(payload, payload + long(h.length));
    buf.erase(buf.begin(), payload + long(h.length));
    return true;
}

void Writer::u32(std::uint32_t v) {
    std::uint8_t b[4];
    put_u32(b, v);
    buf_.insert(buf_.end(), b, b + 4);
}
void Writer::bytes(const std::vector<std::uint8_t> &b) {
    u32(std::uint32_t(b.size()));
    buf_.insert(buf_.end(), b.begin(), b.end());
}
void Writer::str(const std::string &s) { bytes(std::vector<std::uint8_t>(s.begin(), s.end())); }

void Reader::need(std::size_t n) const {
    require(buf_.size() - pos_ >= n, ErrorCode::corrupt, "bootstrap: truncated frame payload");
}
std::uint32_t Reader::u32() {
    need(4);
    std::uint32_t v = get_u32(buf_.data() + pos_);
    pos_ += 4;
    return v;
}
std::vector<std::uint8_t> Reader::bytes(std::uint32_t max) {
    const std::uint32_t n = u32();
    require(n <= max, ErrorCode::corrupt,
            "bootstrap: field of " + std::to_string(n) + " bytes exceeds the limit of " + std::to_string(max));
    need(n);
    std::vector<std::uint8_t> out(buf_.begin() + long(pos_), buf_.begin() + long(pos_ + n));
    pos_ += n;
    return out;
}
std::string Reader::str(std::uint32_t max) {
    auto b = bytes(max);
    return std::string(b.begin(), b.end());
}

bool constant_time_equal(const std::string &a, const std::string &b) {
    const std::size_t n = std::max(a.size(), b.size());
    unsigned char diff = a.size() == b.size() ? 0 : 1;
    for (std::size_t i = 0; i < n; ++i) {
        const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
        const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
        diff |= static_cast<unsigned char>(x ^ y);
    }
    return diff == 0;
}

} // namespace shardopt::bootstrap

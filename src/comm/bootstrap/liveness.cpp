#include "liveness.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "shardopt/error.hpp"

namespace shardopt::bootstrap {
namespace {

// Short: news frames are tiny, and a peer that does not drain its socket is not our problem.
Deadline soon() { return Clock::now() + std::chrono::milliseconds(200); }

} // namespace

Liveness::Liveness(int rank, int world_size, std::vector<Socket> conns)
    : rank_(rank), world_size_(world_size), reported_(std::size_t(world_size), false) {
    for (int i = 0; i < int(conns.size()); ++i) {
        if (!conns[i]) continue;
        Peer p;
        p.sock = std::move(conns[i]);
        p.rank = rank == 0 ? i : 0;
        p.open = true;
        peers_.push_back(std::move(p));
    }
    require(::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) == 0, ErrorCode::io,
            std::string("bootstrap: pipe failed: ") + std::strerror(errno));
    thread_ = std::thread([this] { watch(); });
}

Liveness::~Liveness() {
    goodbye();
    for (int fd : wake_)
        if (fd >= 0) ::close(fd);
}

void Liveness::watch() {
    std::vector<pollfd> fds;
    for (;;) {
        fds.clear();
        fds.push_back(pollfd{wake_[0], POLLIN, 0});
        for (const auto &p : peers_)
            if (p.open) fds.push_back(pollfd{p.sock.fd(), POLLIN, 0});
        const int rc = ::poll(fds.data(), nfds_t(fds.size()), -1);
        if (rc < 0 && errno != EINTR) return;
        if (fds[0].revents) return; // goodbye()
        auto events = read_available();
        if (!events.empty()) {
            std::lock_guard<std::mutex> lock(mutex_);
            pending_.insert(pending_.end(), events.begin(), events.end());
            news_.store(true, std::memory_order_release);
        }
    }
}

std::vector<Liveness::Event> Liveness::poll() {
    if (!news_.load(std::memory_order_acquire)) return {};
    std::lock_guard<std::mutex> lock(mutex_);
    news_.store(false, std::memory_order_relaxed);
    return std::move(pending_);
}

void Liveness::relay(int rank, bool left, const std::string &reason) {
    if (rank_ != 0) return;
    Writer w;
    w.u32(std::uint32_t(rank));
    w.u32(left ? 1 : 0);
    w.str(reason);
    const auto payload = w.take();
    for (auto &p : peers_) {
        if (!p.open || p.rank == rank) continue;
        try {
            send_frame(p.sock, FrameType::lost, payload, soon());
        } catch (const Error &) {
            // Its own close will be seen by the next read.
        }
    }
}

void Liveness::drop(Peer &p, bool left, const std::string &reason, std::vector<Event> &events) {
    p.open = false;
    p.sock = Socket();
    p.in.clear();
    if (p.rank >= 0 && p.rank < world_size_ && !reported_[p.rank]) {
        reported_[p.rank] = true;
        events.push_back({p.rank, left, reason});
        relay(p.rank, left, reason);
    }
}

std::vector<Liveness::Event> Liveness::read_available() {
    std::vector<Event> events;
    for (auto &p : peers_) {
        if (!p.open) continue;
        std::uint8_t buf[4096];
        bool closed = false;
        std::string why;
        for (;;) {
            const ssize_t r = ::recv(p.sock.fd(), buf, sizeof buf, MSG_DONTWAIT);
            if (r > 0) {
                p.in.insert(p.in.end(), buf, buf + r);
                continue;
            }
            if (r == 0) {
                closed = true;
                why = "its connection to the job closed";
            } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                closed = true;
                why = std::string("its connection to the job failed: ") + std::strerror(errno);
            }
            break;
        }
        Frame f;
        bool left = false;
        try {
            while (pop_frame(p.in, f)) {
                if (f.type == FrameType::bye) {
                    left = true;
                } else if (f.type == FrameType::lost && rank_ != 0) {
                    Reader rd(f.payload);
                    const int who = int(rd.u32());
                    const bool who_left = rd.u32() != 0;
                    const std::string reason = rd.str();
                    if (who >= 0 && who < world_size_ && who != rank_ && !reported_[who]) {
                        reported_[who] = true;
                        events.push_back({who, who_left, reason});
                    }
                }
            }
        } catch (const Error &e) {
            closed = true;
            why = std::string("its connection to the job sent garbage: ") + e.what();
        }
        if (left)
            drop(p, true, "it left the job (closed its communicator)", events);
        else if (closed)
            drop(p, false, "process died or " + why, events);
    }
    return events;
}

void Liveness::goodbye() {
    if (said_goodbye_) return;
    said_goodbye_ = true;
    if (thread_.joinable()) {
        const char c = 1;
        while (::write(wake_[1], &c, 1) < 0 && errno == EINTR) {
        }
        thread_.join();
    }
    for (auto &p : peers_) {
        if (!p.open) continue;
        try {
            send_frame(p.sock, FrameType::bye, {}, soon());
        } catch (const Error &) {
        }
        ::shutdown(p.sock.fd(), SHUT_WR);
        p.open = false;
        p.sock = Socket();
    }
}

} // namespace shardopt::bootstrap

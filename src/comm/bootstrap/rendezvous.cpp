#include "rendezvous.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <sstream>

#include "frame.hpp"
#include "messages.hpp"
#include "shardopt/error.hpp"

namespace shardopt::bootstrap {
namespace {

std::string where(const BootstrapConfig &c) { return c.master_addr + ":" + std::to_string(c.master_port); }

long long elapsed_ms(Clock::time_point start) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

RendezvousResult serve(const BootstrapConfig &c, const std::vector<std::uint8_t> &mine) {
    const auto start = Clock::now();
    const auto deadline = start + c.timeout;
    const std::string bind = c.bind_addr.empty() ? c.master_addr : c.bind_addr;
    Socket listener = listen_on(bind, c.master_port);
    const int n = c.world_size;
    std::vector<std::vector<std::uint8_t>> blobs(n);
    std::vector<Socket> conns(n);
    std::vector<std::string> origin(n);
    blobs[0] = mine;
    origin[0] = "rank 0 itself";
    std::vector<bool> joined(n, false);
    joined[0] = true;
    int joined_count = 1;
    std::string refusals;
    int refused = 0;

    // Fails the rendezvous everywhere: every connected rank (and `extra`) gets the reason.
    auto fail_all = [&](const std::string &reason, Socket *extra) {
        const auto short_deadline = Clock::now() + std::chrono::seconds(1);
        const auto payload = encode_refuse(reason);
        for (auto *s : {extra}) {
            if (s && *s) try {
                    send_frame(*s, FrameType::refuse, payload, short_deadline);
                } catch (const Error &) {
                }
        }
        for (auto &s : conns)
            if (s) try {
                    send_frame(s, FrameType::refuse, payload, short_deadline);
                } catch (const Error &) {
                }
        throw Error(ErrorCode::invalid_argument, "bootstrap: " + reason);
    };

    // Joins are read concurrently: a connection that says nothing (or dribbles) holds up only
    // itself, never the ranks behind it. Each gets a few seconds to send its join.
    struct Pending {
        Socket s;
        std::string peer;
        std::vector<std::uint8_t> buf;
        Clock::time_point until;
    };
    constexpr std::size_t kMaxPending = 64;
    const std::uint32_t max_join = kMaxJoinBytes + kMaxTokenBytes + 64;
    std::vector<Pending> pending;

    auto refuse = [&](Pending &p, const std::string &why, const std::string &reply) {
        ++refused;
        refusals += " " + p.peer + why + ";";
        if (reply.empty()) return;
        try {
            send_frame(p.s, FrameType::refuse, encode_refuse(reply), Clock::now() + std::chrono::milliseconds(200));
        } catch (const Error &) {
        }
    };
    // A whole join frame arrived on p: admit the rank, refuse the connection, or fail the job.
    auto admit = [&](Pending &p, const Frame &f) {
        int rank = -1, world = -1;
        std::string token;
        std::vector<std::uint8_t> blob;
        try {
            require(f.type == FrameType::join, ErrorCode::corrupt, "bootstrap: expected a join frame");
            JoinRequest j = parse_join(f.payload);
            world = int(std::min<std::uint32_t>(j.world_size, 0x7fffffff));
            rank = int(std::min<std::uint32_t>(j.rank, 0x7fffffff));
            token = std::move(j.token);
            blob = std::move(j.blob);
        } catch (const Error &e) {
            return refuse(p, std::string(": ") + e.what(), std::string("malformed join: ") + e.what());
        }
        if (!constant_time_equal(token, c.job_token))
            return refuse(p, " claiming rank " + std::to_string(rank) + " had the wrong job token",
                          "wrong job token (rank " + std::to_string(rank) + " from " + p.peer +
                              "): SHARDOPT_JOB_TOKEN differs from rank 0's");
        if (world != n)
            fail_all("world size disagrees across ranks: rank " + std::to_string(rank) + " (" + p.peer +
                         ") has world size " + std::to_string(world) + ", rank 0 has " + std::to_string(n),
                     &p.s);
        if (rank < 1 || rank >= n)
            fail_all("rank " + std::to_string(rank) + " (" + p.peer + ") is out of range for world size " +
                         std::to_string(n),
                     &p.s);
        if (joined[rank])
            fail_all("rank " + std::to_string(rank) + " joined twice (from " + origin[rank] + " and from " + p.peer +
                         "): two processes share SHARDOPT_RANK=" + std::to_string(rank),
                     &p.s);
        joined[rank] = true;
        ++joined_count;
        blobs[rank] = std::move(blob);
        origin[rank] = p.peer;
        conns[rank] = std::move(p.s);
    };
    // Reads what p has sent so far; true when p is settled (admitted or refused).
    auto read_some = [&](Pending &p) {
        std::uint8_t chunk[4096];
        const ssize_t got = ::recv(p.s.fd(), chunk, sizeof chunk, MSG_DONTWAIT);
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return false;
        if (got <= 0) {
            refuse(p, " closed the connection before a whole join arrived", "");
            return true;
        }
        p.buf.insert(p.buf.end(), chunk, chunk + got);
        Frame f;
        try {
            // Lengths are bounded (max_join) as soon as the header is in, before buffering more.
            if (!pop_frame(p.buf, f, max_join)) return false;
        } catch (const Error &e) {
            // Garbage, an unknown protocol version or an oversized frame: not a rank of this
            // job. Say why (best effort) and go on with the job.
            refuse(p, std::string(": ") + e.what(), std::string("malformed join: ") + e.what());
            return true;
        }
        admit(p, f);
        return true;
    };

    while (joined_count < n) {
        const auto now = Clock::now();
        for (auto it = pending.begin(); it != pending.end();) {
            if (now < it->until) {
                ++it;
                continue;
            }
            refuse(*it, " sent no join in time", "");
            it = pending.erase(it);
        }
        if (now >= deadline) {
            std::ostringstream out;
            out << "bootstrap: rendezvous on " << bind << ":" << c.master_port << " timed out after "
                << elapsed_ms(start) << " ms: ranks never joined:";
            for (int r = 0; r < n; ++r)
                if (!joined[r]) out << " " << r;
            if (refused) out << " (" << refused << " join(s) refused:" << refusals << ")";
            throw Error(ErrorCode::timeout, out.str());
        }
        Clock::time_point wake = deadline;
        for (const auto &p : pending) wake = std::min(wake, p.until);
        std::vector<pollfd> fds;
        fds.push_back(pollfd{listener.fd(), POLLIN, 0});
        for (const auto &p : pending) fds.push_back(pollfd{p.s.fd(), POLLIN, 0});
        const auto wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count() + 1;
        const int ready = ::poll(fds.data(), nfds_t(fds.size()), int(std::min<long long>(wait_ms, 1000)));
        if (ready <= 0) continue;
        // Connections first (their sockets are polled from the next round on).
        for (std::size_t i = 1; i < fds.size(); ++i) {
            if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            Pending &p = pending[i - 1];
            if (read_some(p)) p.s = Socket(); // settled: admitted (moved out) or refused (closed)
        }
        pending.erase(std::remove_if(pending.begin(), pending.end(), [](const Pending &p) { return !p.s; }),
                      pending.end());
        if (fds[0].revents & POLLIN) {
            std::string peer;
            Socket s = accept_until(listener, Clock::now(), &peer);
            if (s && pending.size() < kMaxPending)
                pending.push_back(Pending{std::move(s), peer, {}, Clock::now() + std::chrono::seconds(5)});
            else if (s)
                ++refused, refusals += " " + peer + ": too many connections at once;";
        }
    }

    const auto payload = encode_welcome(blobs);
    for (int r = 1; r < n; ++r) {
        try {
            send_frame(conns[r], FrameType::welcome, payload, deadline);
        } catch (const Error &e) {
            throw Error(ErrorCode::peer_lost, "bootstrap: rank " + std::to_string(r) + " (" + origin[r] +
                                                  ") left during the rendezvous: " + e.what());
        }
    }
    RendezvousResult out;
    out.blobs = std::move(blobs);
    out.liveness = std::make_unique<Liveness>(0, n, std::move(conns));
    return out;
}

RendezvousResult join(const BootstrapConfig &c, const std::vector<std::uint8_t> &mine) {
    const auto start = Clock::now();
    const auto deadline = start + c.timeout;
    Socket s = connect_until(c.master_addr, c.master_port, deadline);
    JoinRequest j;
    j.world_size = std::uint32_t(c.world_size);
    j.rank = std::uint32_t(c.rank);
    j.token = c.job_token;
    j.blob = mine;
    require(j.token.size() <= kMaxTokenBytes && j.blob.size() <= kMaxJoinBytes, ErrorCode::invalid_argument,
            "bootstrap: job token or worker address too long");
    Frame f;
    try {
        send_frame(s, FrameType::join, encode_join(j), deadline);
        if (!recv_frame(s, f, deadline))
            throw Error(ErrorCode::timeout, "bootstrap: rank " + std::to_string(c.rank) + " joined " + where(c) +
                                                " but the job did not assemble within " +
                                                std::to_string(elapsed_ms(start)) + " ms (other ranks missing)");
    } catch (const Error &e) {
        if (e.code() == ErrorCode::timeout) throw;
        throw Error(e.code(), "bootstrap: rank " + std::to_string(c.rank) + " lost the rendezvous master " +
                                  where(c) + ": " + e.what());
    }
    if (f.type == FrameType::refuse)
        throw Error(ErrorCode::invalid_argument, "bootstrap: rendezvous master " + where(c) + " refused rank " +
                                                     std::to_string(c.rank) + ": " + parse_refuse(f.payload));
    require(f.type == FrameType::welcome, ErrorCode::corrupt, "bootstrap: unexpected frame from the master");
    RendezvousResult out;
    out.blobs = parse_welcome(f.payload, std::uint32_t(c.world_size));
    std::vector<Socket> conns;
    conns.push_back(std::move(s));
    out.liveness = std::make_unique<Liveness>(c.rank, c.world_size, std::move(conns));
    return out;
}

} // namespace

RendezvousResult rendezvous_allgather(const BootstrapConfig &config, const std::vector<std::uint8_t> &mine) {
    config.validate();
    if (config.world_size == 1) {
        RendezvousResult out;
        out.blobs = {mine};
        return out;
    }
    return config.rank == 0 ? serve(config, mine) : join(config, mine);
}

} // namespace shardopt::bootstrap

#include "rendezvous.hpp"

#include <algorithm>
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

    while (joined_count < n) {
        std::string peer;
        Socket s = accept_until(listener, deadline, &peer);
        if (!s) {
            std::ostringstream out;
            out << "bootstrap: rendezvous on " << bind << ":" << c.master_port << " timed out after "
                << elapsed_ms(start) << " ms: ranks never joined:";
            for (int r = 0; r < n; ++r)
                if (!joined[r]) out << " " << r;
            if (refused) out << " (" << refused << " join(s) refused:" << refusals << ")";
            throw Error(ErrorCode::timeout, out.str());
        }
        Frame f;
        int rank = -1, world = -1;
        std::string token;
        std::vector<std::uint8_t> blob;
        try {
            // A connection that says nothing within a few seconds is dropped, not waited on.
            // Lengths are bounded (kMaxJoinBytes) before anything is allocated for them.
            if (!recv_frame(s, f, std::min(deadline, Clock::now() + std::chrono::seconds(5)),
                            kMaxJoinBytes + kMaxTokenBytes + 64)) {
                ++refused;
                refusals += " " + peer + " sent no join in time;";
                continue;
            }
            require(f.type == FrameType::join, ErrorCode::corrupt, "bootstrap: expected a join frame");
            JoinRequest j = parse_join(f.payload);
            world = int(std::min<std::uint32_t>(j.world_size, 0x7fffffff));
            rank = int(std::min<std::uint32_t>(j.rank, 0x7fffffff));
            token = std::move(j.token);
            blob = std::move(j.blob);
        } catch (const Error &e) {
            // Garbage, an unknown protocol version, an oversized or malformed frame, or a dropped
            // connection: not a rank of this job. Say why (best effort) and go on with the job.
            ++refused;
            refusals += " " + peer + ": " + e.what() + ";";
            try {
                send_frame(s, FrameType::refuse, encode_refuse(std::string("malformed join: ") + e.what()),
                           Clock::now() + std::chrono::milliseconds(200));
            } catch (const Error &) {
            }
            continue;
        }
        if (!constant_time_equal(token, c.job_token)) {
            ++refused;
            refusals += " " + peer + " claiming rank " + std::to_string(rank) + " had the wrong job token;";
            try {
                send_frame(s, FrameType::refuse,
                           encode_refuse("wrong job token (rank " + std::to_string(rank) + " from " + peer +
                                         "): SHARDOPT_JOB_TOKEN differs from rank 0's"),
                           Clock::now() + std::chrono::seconds(1));
            } catch (const Error &) {
            }
            continue;
        }
        if (world != n)
            fail_all("world size disagrees across ranks: rank " + std::to_string(rank) + " (" + peer +
                         ") has world size " + std::to_string(world) + ", rank 0 has " + std::to_string(n),
                     &s);
        if (rank < 1 || rank >= n)
            fail_all("rank " + std::to_string(rank) + " (" + peer + ") is out of range for world size " +
                         std::to_string(n),
                     &s);
        if (joined[rank])
            fail_all("rank " + std::to_string(rank) + " joined twice (from " + origin[rank] + " and from " + peer +
                         "): two processes share SHARDOPT_RANK=" + std::to_string(rank),
                     &s);
        joined[rank] = true;
        ++joined_count;
        blobs[rank] = std::move(blob);
        origin[rank] = peer;
        conns[rank] = std::move(s);
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

#include "rendezvous.hpp"

#include <sstream>

#include "frame.hpp"
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
        Writer w;
        w.str(reason);
        auto payload = w.take();
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
            if (!recv_frame(s, f, std::min(deadline, Clock::now() + std::chrono::seconds(5)))) continue;
            if (f.type != FrameType::join) continue;
            Reader r(f.payload);
            world = int(r.u32());
            rank = int(r.u32());
            token = r.str();
            blob = r.bytes();
        } catch (const Error &) {
            continue; // garbage or a dropped connection: not a rank of this job
        }
        if (!constant_time_equal(token, c.job_token)) {
            ++refused;
            refusals += " " + peer + " claiming rank " + std::to_string(rank) + " had the wrong job token;";
            Writer w;
            w.str("wrong job token (rank " + std::to_string(rank) + " from " + peer +
                  "): SHARDOPT_JOB_TOKEN differs from rank 0's");
            try {
                send_frame(s, FrameType::refuse, w.take(), Clock::now() + std::chrono::seconds(1));
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

    Writer w;
    w.u32(std::uint32_t(n));
    for (const auto &b : blobs) w.bytes(b);
    const auto payload = w.take();
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
    Writer w;
    w.u32(std::uint32_t(c.world_size));
    w.u32(std::uint32_t(c.rank));
    w.str(c.job_token);
    w.bytes(mine);
    Frame f;
    try {
        send_frame(s, FrameType::join, w.take(), deadline);
        if (!recv_frame(s, f, deadline))
            throw Error(ErrorCode::timeout, "bootstrap: rank " + std::to_string(c.rank) + " joined " + where(c) +
                                                " but the job did not assemble within " +
                                                std::to_string(elapsed_ms(start)) + " ms (other ranks missing)");
    } catch (const Error &e) {
        if (e.code() == ErrorCode::timeout) throw;
        throw Error(e.code(), "bootstrap: rank " + std::to_string(c.rank) + " lost the rendezvous master " +
                                  where(c) + ": " + e.what());
    }
    if (f.type == FrameType::refuse) {
        Reader r(f.payload);
        throw Error(ErrorCode::invalid_argument, "bootstrap: rendezvous master " + where(c) + " refused rank " +
                                                     std::to_string(c.rank) + ": " + r.str());
    }
    require(f.type == FrameType::welcome, ErrorCode::corrupt, "bootstrap: unexpected frame from the master");
    Reader r(f.payload);
    const int n = int(r.u32());
    require(n == c.world_size, ErrorCode::corrupt, "bootstrap: master sent the wrong number of addresses");
    std::vector<std::vector<std::uint8_t>> blobs(n);
    for (auto &b : blobs) b = r.bytes();
    RendezvousResult out;
    out.blobs = std::move(blobs);
    std::vector<Socket> conns;
    conns.push_back(std::move(s));
    out.liveness = std::make_unique<Liveness>(c.rank, n, std::move(conns));
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

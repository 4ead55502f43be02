// Reliability: the rendezvous parsers refuse malformed input (bounded lengths, unknown version,
// trailing bytes, unknown frame types), the token comparison, the listener's bind address, a
// rogue client on a live rendezvous, and the communicator's diagnostics (recent calls in error
// messages, history fingerprints with SHARDOPT_CHECK_FINGERPRINTS).
#define BOOST_TEST_MODULE reliability
#include <boost/test/unit_test.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "comm/bootstrap/frame.hpp"
#include "shardopt/bootstrap.hpp"
#include "comm/bootstrap/messages.hpp"
#include "comm/bootstrap/rendezvous.hpp"
#include "shardopt/error.hpp"
#include "shardopt/inprocess.hpp"
#include "shardopt/ucx.hpp"

using namespace shardopt;
using namespace shardopt::bootstrap;
using Bytes = std::vector<std::uint8_t>;

namespace {

template <typename F> ErrorCode code_of(F &&f) {
    try {
        f();
    } catch (const Error &e) {
        return e.code();
    }
    return ErrorCode::ok;
}

Bytes header(FrameType type, std::uint32_t length, std::uint16_t version = kProtocolVersion) {
    Bytes h(kFrameHeaderBytes);
    encode_header(h.data(), type, length);
    h[4] = std::uint8_t(version);
    h[5] = std::uint8_t(version >> 8);
    return h;
}

int free_port() {
    Socket s(::socket(AF_INET, SOCK_STREAM, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(s.fd(), reinterpret_cast<sockaddr *>(&a), sizeof a);
    socklen_t len = sizeof a;
    ::getsockname(s.fd(), reinterpret_cast<sockaddr *>(&a), &len);
    return ntohs(a.sin_port);
}

void send_raw(const Socket &s, const Bytes &b) {
    std::size_t off = 0;
    while (off < b.size()) {
        const ssize_t w = ::send(s.fd(), b.data() + off, b.size() - off, MSG_NOSIGNAL);
        if (w <= 0) return;
        off += std::size_t(w);
    }
}

} // namespace

BOOST_AUTO_TEST_SUITE(frames)

BOOST_AUTO_TEST_CASE(header_round_trip_and_refusals) {
    const Bytes ok = header(FrameType::join, 100);
    const FrameHeader h = decode_header(ok.data(), 1000);
    BOOST_TEST(int(h.type) == int(FrameType::join));
    BOOST_TEST(h.length == 100u);
    // Length above the caller's bound or the global bound: refused before any allocation.
    BOOST_TEST(int(code_of([&] { decode_header(ok.data(), 99); })) == int(ErrorCode::corrupt));
    const Bytes huge = header(FrameType::join, 0xffffffffu);
    BOOST_TEST(int(code_of([&] { decode_header(huge.data(), 0xffffffffu); })) == int(ErrorCode::corrupt));
    // Unknown protocol version and unknown frame type.
    const Bytes future = header(FrameType::join, 4, kProtocolVersion + 1);
    try {
        decode_header(future.data(), 1000);
        BOOST_FAIL("a future protocol version was accepted");
    } catch (const Error &e) {
        BOOST_TEST(int(e.code()) == int(ErrorCode::corrupt));
        BOOST_TEST(std::string(e.what()).find("protocol version " + std::to_string(kProtocolVersion + 1)) !=
                   std::string::npos);
    }
    Bytes bad_type = header(FrameType::join, 4);
    bad_type[6] = 9;
    BOOST_TEST(int(code_of([&] { decode_header(bad_type.data(), 1000); })) == int(ErrorCode::corrupt));
    Bytes bad_magic = ok;
    bad_magic[0] ^= 1;
    BOOST_TEST(int(code_of([&] { decode_header(bad_magic.data(), 1000); })) == int(ErrorCode::corrupt));
}

BOOST_AUTO_TEST_CASE(join_parsing) {
    JoinRequest j;
    j.world_size = 4;
    j.rank = 3;
    j.token = "secret";
    j.blob = {1, 2, 3};
    const Bytes p = encode_join(j);
    const JoinRequest back = parse_join(p);
    BOOST_TEST(back.world_size == 4u);
    BOOST_TEST(back.rank == 3u);
    BOOST_TEST(back.token == "secret");
    BOOST_TEST(back.blob == j.blob);
    // Every truncation is corrupt, as are trailing bytes.
    for (std::size_t n = 0; n < p.size(); ++n) {
        const Bytes cut(p.begin(), p.begin() + long(n));
        BOOST_TEST(int(code_of([&] { parse_join(cut); })) == int(ErrorCode::corrupt));
    }
    Bytes longer = p;
    longer.push_back(0);
    BOOST_TEST(int(code_of([&] { parse_join(longer); })) == int(ErrorCode::corrupt));
    // A token length claiming 4 GiB: refused by the bound, not by an allocation failure.
    Bytes lie = p;
    lie[8] = lie[9] = lie[10] = lie[11] = 0xff;
    BOOST_TEST(int(code_of([&] { parse_join(lie); })) == int(ErrorCode::corrupt));
}

BOOST_AUTO_TEST_CASE(welcome_parsing) {
    const std::vector<Bytes> blobs = {{1}, {2, 2}, {}};
    const Bytes p = encode_welcome(blobs);
    BOOST_TEST(parse_welcome(p, 3).size() == 3u);
    BOOST_TEST(int(code_of([&] { parse_welcome(p, 4); })) == int(ErrorCode::corrupt));
    // A count of a million ranks in a 4-byte payload: refused before allocating the vector.
    Bytes lie = {0x40, 0x42, 0x0f, 0x00};
    BOOST_TEST(int(code_of([&] { parse_welcome(lie, 1000000); })) == int(ErrorCode::corrupt));
}

BOOST_AUTO_TEST_CASE(constant_time_token) {
    BOOST_TEST(constant_time_equal("abc", "abc"));
    BOOST_TEST(!constant_time_equal("abc", "abd"));
    BOOST_TEST(!constant_time_equal("abc", "ab"));
    BOOST_TEST(!constant_time_equal("", "a"));
    BOOST_TEST(constant_time_equal("", ""));
    BOOST_TEST(!constant_time_equal(std::string("a\0b", 3), std::string("a\0c", 3)));
}

BOOST_AUTO_TEST_CASE(listener_binds_where_told) {
    const int port = free_port();
    Socket l = listen_on("127.0.0.1", port);
    sockaddr_in a{};
    socklen_t len = sizeof a;
    BOOST_REQUIRE(::getsockname(l.fd(), reinterpret_cast<sockaddr *>(&a), &len) == 0);
    BOOST_TEST(a.sin_family == AF_INET);
    BOOST_TEST(ntohl(a.sin_addr.s_addr) == INADDR_LOOPBACK); // not INADDR_ANY
    // The default config listens on loopback.
    BootstrapConfig c;
    BOOST_TEST(c.master_addr == "127.0.0.1");
    BOOST_TEST(c.bind_addr.empty());
}

// A live two-rank rendezvous while a rogue client sends garbage, an oversized frame, an
// unknown version, a malformed join and a wrong token: each is refused, the job assembles.
BOOST_AUTO_TEST_CASE(rogue_clients_refused_job_goes_on) {
    BootstrapConfig c0;
    c0.world_size = 2;
    c0.master_port = free_port();
    c0.job_token = "right-token";
    c0.timeout = std::chrono::seconds(20);
    BootstrapConfig c1 = c0;
    c1.rank = 1;
    std::vector<Bytes> got0, got1;
    std::thread master([&] { got0 = rendezvous_allgather(c0, {0xa0}).blobs; });
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    std::vector<std::string> refusals;
    auto rogue = [&](const Bytes &bytes, bool expect_refuse) {
        Socket s = connect_until("127.0.0.1", c0.master_port, deadline);
        send_raw(s, bytes);
        ::shutdown(s.fd(), SHUT_WR);
        Frame f;
        try {
            if (recv_frame(s, f, Clock::now() + std::chrono::seconds(8)) && f.type == FrameType::refuse)
                refusals.push_back(parse_refuse(f.payload));
            else if (expect_refuse)
                refusals.push_back("NO REFUSAL");
        } catch (const Error &e) {
            if (expect_refuse) refusals.push_back(std::string("closed: ") + e.what());
        }
    };
    rogue(Bytes(64, 0x41), true);                                 // garbage
    rogue(header(FrameType::join, kMaxFrameBytes), true);         // oversized for a join
    rogue(header(FrameType::join, 0, 7), true);                   // unknown protocol version
    Bytes malformed = header(FrameType::join, 3);
    malformed.insert(malformed.end(), {1, 2, 3});
    rogue(malformed, true);                                       // truncated join
    JoinRequest wrong;
    wrong.world_size = 2;
    wrong.rank = 1;
    wrong.token = "wrong-token";
    Bytes w = encode_join(wrong);
    Bytes wf = header(FrameType::join, std::uint32_t(w.size()));
    wf.insert(wf.end(), w.begin(), w.end());
    rogue(wf, true);                                              // wrong token
    got1 = rendezvous_allgather(c1, {0xb1}).blobs;
    master.join();
    BOOST_TEST(got0.size() == 2u);
    BOOST_TEST(got1 == got0);
    BOOST_TEST(got1[0] == Bytes{0xa0});
    BOOST_TEST(got1[1] == Bytes{0xb1});
    BOOST_REQUIRE(refusals.size() == 5u);
    BOOST_TEST(refusals[0].find("magic") != std::string::npos, refusals[0]);
    BOOST_TEST(refusals[1].find("exceeds the limit") != std::string::npos, refusals[1]);
    BOOST_TEST(refusals[2].find("protocol version 7") != std::string::npos, refusals[2]);
    BOOST_TEST(refusals[3].find("truncated") != std::string::npos, refusals[3]);
    BOOST_TEST(refusals[4].find("wrong job token") != std::string::npos, refusals[4]);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(diagnostics)

// Boost.Test assertions are not thread safe: rank threads only record, the test thread checks.
BOOST_AUTO_TEST_CASE(recent_calls_in_mismatch_and_timeout) {
    std::vector<std::string> messages(2);
    std::vector<int> codes(2, -1);
    run_inprocess(2, [&](Communicator &c) {
        c.set_timeout(std::chrono::seconds(10));
        float x[4] = {1, 2, 3, 4};
        c.allreduce(x, 4, ReduceOp::sum);
        c.barrier();
        try {
            if (c.rank() == 0)
                c.allreduce(x, x, 4, DType::f32, ReduceOp::sum);
            else
                c.broadcast(x, 4, DType::f32, 0);
        } catch (const Error &e) {
            codes[std::size_t(c.rank())] = int(e.code());
            messages[std::size_t(c.rank())] = e.what();
        }
    });
    for (int r = 0; r < 2; ++r) {
        BOOST_TEST(codes[std::size_t(r)] == int(ErrorCode::mismatch));
        const auto &m = messages[std::size_t(r)];
        BOOST_TEST(m.find("allreduce(count=4, dtype=f32, op=sum)") != std::string::npos, m);
        BOOST_TEST(m.find("broadcast(count=4, dtype=f32, root=0)") != std::string::npos, m);
        BOOST_TEST(m.find("collective #2") != std::string::npos, m);
        BOOST_TEST(m.find("rank " + std::to_string(r) + " recent calls (oldest first): #0 allreduce") !=
                       std::string::npos,
                   m);
        BOOST_TEST(m.find("#1 barrier() ok") != std::string::npos, m);
        BOOST_TEST(m.find("failed]") != std::string::npos, m);
    }
    std::string timeout_message;
    run_inprocess(3, [&](Communicator &c) {
        c.set_timeout(std::chrono::milliseconds(300));
        if (c.rank() == 2) return; // never arrives
        try {
            c.barrier();
        } catch (const Error &e) {
            if (c.rank() == 0) timeout_message = e.what();
        }
    });
    BOOST_TEST(timeout_message.find("ranks never arrived: 2") != std::string::npos, timeout_message);
    BOOST_TEST(timeout_message.find("recent calls") != std::string::npos, timeout_message);
}

BOOST_AUTO_TEST_CASE(ring_keeps_last_calls) {
    std::string text;
    run_inprocess(1, [&](Communicator &c) {
        for (int i = 0; i < 20; ++i) c.barrier();
        text = c.recent_calls();
    });
    BOOST_TEST(text.find("#19 barrier() ok") != std::string::npos, text);
    BOOST_TEST(text.find("#12 barrier()") != std::string::npos, text);
    BOOST_TEST(text.find("#11 barrier()") == std::string::npos, text);
}

BOOST_AUTO_TEST_CASE(fingerprints_env) {
    ::unsetenv("SHARDOPT_CHECK_FINGERPRINTS");
    std::vector<int> checks_off(2, -1), checks_on(2, -1), changed(2, -1);
    std::vector<std::uint64_t> fp_off(2, 1), fp(2);
    run_inprocess(2, [&](Communicator &c) {
        checks_off[std::size_t(c.rank())] = c.fingerprint_checks();
        c.barrier();
        fp_off[std::size_t(c.rank())] = c.history_fingerprint();
    });
    ::setenv("SHARDOPT_CHECK_FINGERPRINTS", "1", 1);
    run_inprocess(2, [&](Communicator &c) {
        checks_on[std::size_t(c.rank())] = c.fingerprint_checks();
        float x[3] = {1, 2, 3};
        c.allreduce(x, 3, ReduceOp::max);
        const auto before = c.history_fingerprint();
        // split with different colors per rank: legitimately different, no false mismatch.
        auto child = c.split(c.rank(), 0);
        c.broadcast(x, 3, DType::f32, 1);
        changed[std::size_t(c.rank())] = c.history_fingerprint() != before;
        fp[std::size_t(c.rank())] = c.history_fingerprint();
    });
    ::unsetenv("SHARDOPT_CHECK_FINGERPRINTS");
    for (int r = 0; r < 2; ++r) {
        BOOST_TEST(checks_off[std::size_t(r)] == 0);
        BOOST_TEST(fp_off[std::size_t(r)] == 0u);
        BOOST_TEST(checks_on[std::size_t(r)] == 1);
        BOOST_TEST(changed[std::size_t(r)] == 1);
    }
    BOOST_TEST(fp[0] == fp[1]);
    BOOST_TEST(fp[0] != 0u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(environment)

// A UCX backend started without a launcher's environment refuses to become rank 0 of 1.
BOOST_AUTO_TEST_CASE(ucx_without_a_world_size_is_refused) {
    const char *names[] = {"SHARDOPT_WORLD_SIZE", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"};
    std::vector<std::pair<std::string, std::string>> saved;
    for (const char *n : names)
        if (const char *v = std::getenv(n)) saved.emplace_back(n, v);
    for (const char *n : names) ::unsetenv(n);
    try {
        create_communicator_from_env("ucx");
        BOOST_ERROR("a UCX communicator was created without a world size");
    } catch (const Error &e) {
        BOOST_TEST((e.code() == ErrorCode::invalid_argument || e.code() == ErrorCode::unsupported));
        if (ucx_available()) BOOST_TEST(std::string(e.what()).find("SHARDOPT_WORLD_SIZE=1") != std::string::npos, e.what());
    }
    for (const auto &[n, v] : saved) ::setenv(n.c_str(), v.c_str(), 1);
}

// Under torchrun (no SHARDOPT_JOB_TOKEN) the job token is its run id and restart count: each restart's group has
// its own, so a worker of an earlier restart cannot join the next; SHARDOPT_JOB_TOKEN still wins.
BOOST_AUTO_TEST_CASE(torchrun_run_id_and_restart_count_are_the_job_token) {
    const char *names[] = {"SHARDOPT_JOB_TOKEN", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT"};
    std::vector<std::pair<std::string, std::string>> saved;
    for (const char *n : names)
        if (const char *v = std::getenv(n)) saved.emplace_back(n, v);
    for (const char *n : names) ::unsetenv(n);
    BOOST_TEST(BootstrapConfig::from_env().job_token.empty());
    ::setenv("TORCHELASTIC_RUN_ID", "job42", 1);
    ::setenv("TORCHELASTIC_RESTART_COUNT", "0", 1);
    const std::string first = BootstrapConfig::from_env().job_token;
    ::setenv("TORCHELASTIC_RESTART_COUNT", "1", 1);
    const std::string second = BootstrapConfig::from_env().job_token;
    BOOST_TEST(first == "torchrun:job42:0");
    BOOST_TEST(second == "torchrun:job42:1");
    ::setenv("SHARDOPT_JOB_TOKEN", "s3cret", 1);
    BOOST_TEST(BootstrapConfig::from_env().job_token == "s3cret");
    for (const char *n : names) ::unsetenv(n);
    for (const auto &[n, v] : saved) ::setenv(n.c_str(), v.c_str(), 1);
}

BOOST_AUTO_TEST_SUITE_END()

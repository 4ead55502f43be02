// The bootstrap liveness channel (src/comm/bootstrap/liveness.hpp) over socket pairs: rank 0
// (the hub) and ranks 1 and 2 in one process. Rank 2 is either a Liveness (clean goodbye) or a
// bare socket closed without a word (a crash, as the kernel closes a killed process's sockets).
#define BOOST_TEST_MODULE shardopt liveness
#include <boost/test/unit_test.hpp>

#include <sys/socket.h>

#include <chrono>
#include <memory>
#include <thread>

#include "comm/bootstrap/liveness.hpp"

using shardopt::bootstrap::Liveness;
using shardopt::bootstrap::Socket;

namespace {

std::pair<Socket, Socket> socket_pair() {
    int fds[2];
    BOOST_REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
    return {Socket(fds[0]), Socket(fds[1])};
}

// Polls until news arrives (or 5 s pass).
std::vector<Liveness::Event> next_events(Liveness &l) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (;;) {
        auto events = l.poll();
        if (!events.empty() || std::chrono::steady_clock::now() > until) return events;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

struct Job {
    std::unique_ptr<Liveness> hub, one, two;
    Socket two_raw; // rank 2's end when it has no Liveness
    explicit Job(bool two_has_liveness) {
        auto p1 = socket_pair();
        auto p2 = socket_pair();
        std::vector<Socket> hub_conns(3), c1;
        hub_conns[1] = std::move(p1.first);
        hub_conns[2] = std::move(p2.first);
        c1.push_back(std::move(p1.second));
        hub = std::make_unique<Liveness>(0, 3, std::move(hub_conns));
        one = std::make_unique<Liveness>(1, 3, std::move(c1));
        if (two_has_liveness) {
            std::vector<Socket> c2;
            c2.push_back(std::move(p2.second));
            two = std::make_unique<Liveness>(2, 3, std::move(c2));
        } else {
            two_raw = std::move(p2.second);
        }
    }
};

} // namespace

BOOST_AUTO_TEST_CASE(quiet_job_has_no_news) {
    Job job(true);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    BOOST_TEST(job.hub->poll().empty());
    BOOST_TEST(job.one->poll().empty());
    BOOST_TEST(job.two->poll().empty());
}

BOOST_AUTO_TEST_CASE(crashed_rank_is_reported_and_relayed) {
    Job job(false);
    job.two_raw = Socket(); // closed without a goodbye
    const auto seen = next_events(*job.hub);
    BOOST_REQUIRE_EQUAL(seen.size(), 1u);
    BOOST_TEST(seen[0].rank == 2);
    BOOST_TEST(!seen[0].left);
    const auto relayed = next_events(*job.one);
    BOOST_REQUIRE_EQUAL(relayed.size(), 1u);
    BOOST_TEST(relayed[0].rank == 2);
    BOOST_TEST(!relayed[0].left);
    BOOST_TEST(relayed[0].reason.find("died") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(clean_goodbye_is_reported_as_left) {
    Job job(true);
    job.two.reset();
    const auto seen = next_events(*job.hub);
    BOOST_REQUIRE_EQUAL(seen.size(), 1u);
    BOOST_TEST(seen[0].rank == 2);
    BOOST_TEST(seen[0].left);
    const auto relayed = next_events(*job.one);
    BOOST_REQUIRE_EQUAL(relayed.size(), 1u);
    BOOST_TEST(relayed[0].left);
    BOOST_TEST(job.one->poll().empty()); // reported once
}

BOOST_AUTO_TEST_CASE(hub_loss_is_seen_by_every_rank) {
    Job job(true);
    job.hub.reset(); // says goodbye: rank 0 left
    for (Liveness *l : {job.one.get(), job.two.get()}) {
        const auto seen = next_events(*l);
        BOOST_REQUIRE_EQUAL(seen.size(), 1u);
        BOOST_TEST(seen[0].rank == 0);
        BOOST_TEST(seen[0].left);
    }
}

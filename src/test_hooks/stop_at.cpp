// TEST ONLY, linked into the test build of the core (shardopt_core_testing), never into the
// shipped library: SHARDOPT_TEST_STOP_AT (comm/ucx/test_hook.hpp).
#include "comm/ucx/test_hook.hpp"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace shardopt::ucx::test_hook {
namespace {

const char *const kNames[] = {"none", "shm", "cma", "attach"};

struct Armed {
    int point = none;
    std::uint64_t seq = 0;
    int sig = SIGSTOP;
};

Armed parse() {
    Armed a;
    const char *v = std::getenv("SHARDOPT_TEST_STOP_AT");
    if (!v || !*v) return a;
    const char *colon = std::strchr(v, ':');
    int point = none;
    for (int p = shm; p <= attach; ++p)
        if (colon && std::size_t(colon - v) == std::strlen(kNames[p]) && !std::strncmp(v, kNames[p], colon - v))
            point = p;
    char *end = nullptr;
    const unsigned long long seq = colon ? std::strtoull(colon + 1, &end, 10) : 0;
    if (point == none || end == colon + 1 || (*end && std::strcmp(end, ":kill") && std::strcmp(end, ":stop"))) {
        std::fprintf(stderr, "shardopt test hook: ignoring SHARDOPT_TEST_STOP_AT=%s (want shm|cma|attach:SEQ[:kill])\n",
                     v);
        return a;
    }
    a.point = point;
    a.seq = seq;
    a.sig = !std::strcmp(end, ":kill") ? SIGKILL : SIGSTOP;
    return a;
}

const Armed armed = parse();

} // namespace

std::atomic<int> armed_point{armed.point};

void reached(Point p, std::uint64_t seq) {
    if (seq != armed.seq) return;
    armed_point.store(none, std::memory_order_relaxed); // once: a process continued with SIGCONT goes on normally
    std::fprintf(stderr, "shardopt test hook: pid %d %s at %s:%llu\n", int(getpid()),
                 armed.sig == SIGKILL ? "dying" : "stopping", kNames[p], static_cast<unsigned long long>(seq));
    std::fflush(stderr);
    raise(armed.sig);
}

} // namespace shardopt::ucx::test_hook

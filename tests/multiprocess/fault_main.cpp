// Fault-injection helper for tests/multiprocess/fault_test.py. Modes:
//   join              create the communicator from the environment and barrier; on error print
//                     "ERROR <code>: <message>" and exit 3, else print "JOINED" and exit 0.
//   peer-kill VICTIM  every rank loops 4 MiB allreduces; rank VICTIM SIGKILLs itself after
//                     300 ms. Survivors must fail with peer_lost naming "rank VICTIM" within the
//                     communicator timeout: they print "OK <seconds> <message>" and exit 0, or
//                     "BAD ..." and exit 1.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "shardopt/ucx.hpp"

using namespace shardopt;
using Clock = std::chrono::steady_clock;

static int join_mode() {
    try {
        auto comm = create_communicator_from_env("ucx");
        comm->barrier();
        std::printf("JOINED rank %d of %d\n", comm->rank(), comm->size());
        return 0;
    } catch (const Error &e) {
        std::printf("ERROR %s: %s\n", error_code_name(e.code()), e.what());
        return 3;
    }
}

static int peer_kill_mode(int victim) {
    auto comm = create_communicator_from_env("ucx");
    comm->barrier();
    if (comm->rank() == victim) {
        std::thread([] {
            std::this_thread::sleep_for(std::chrono::milliseconds(300));
            raise(SIGKILL);
        }).detach();
    }
    std::vector<float> buf(1 << 20, 1.0f);
    const auto kill_time = Clock::now() + std::chrono::milliseconds(300);
    try {
        for (;;) comm->allreduce(buf.data(), buf.size(), ReduceOp::sum);
    } catch (const Error &e) {
        const double secs = std::chrono::duration<double>(Clock::now() - kill_time).count();
        const std::string what = e.what();
        const double limit = double(comm->timeout().count()) / 1000.0;
        if (e.code() == ErrorCode::peer_lost && what.find("rank " + std::to_string(victim)) != std::string::npos &&
            secs < limit) {
            std::printf("OK %.2f %s\n", secs, what.c_str());
            return 0;
        }
        std::printf("BAD after %.2f s (limit %.1f): %s: %s\n", secs, limit, error_code_name(e.code()), what.c_str());
        return 1;
    }
}

int main(int argc, char **argv) {
    if (argc >= 2 && !std::strcmp(argv[1], "join")) return join_mode();
    if (argc >= 3 && !std::strcmp(argv[1], "peer-kill")) return peer_kill_mode(std::atoi(argv[2]));
    std::fprintf(stderr, "usage: %s join | peer-kill VICTIM\n", argv[0]);
    return 2;
}

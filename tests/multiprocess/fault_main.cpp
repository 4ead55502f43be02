// Fault-injection helper for tests/multiprocess/fault_test.py. Modes:
//   join              create the communicator from the environment and barrier; on error print
//                     "ERROR <code>: <message>" and exit 3, else print "JOINED" and exit 0.
//   peer-kill VICTIM  every rank loops 4 MiB allreduces; rank VICTIM SIGKILLs itself after
//                     300 ms. Survivors must fail with peer_lost naming "rank VICTIM" within the
//                     communicator timeout: they print "OK <seconds> <message>" and exit 0, or
//                     "BAD ..." and exit 1.
//   peer-exit VICTIM  like peer-kill, but rank VICTIM runs 5 allreduces, then closes its
//                     communicator cleanly and stays alive 3 s ("LEFT", exit 0); the others
//                     must fail with peer_lost naming it ("left the job"), not time out.
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

static int peer_exit_mode(int victim) {
    auto comm = create_communicator_from_env("ucx");
    comm->barrier();
    std::vector<float> buf(1 << 20, 1.0f);
    if (comm->rank() == victim) {
        for (int i = 0; i < 5; ++i) comm->allreduce(buf.data(), buf.size(), ReduceOp::sum);
        comm.reset();
        std::printf("LEFT\n");
        std::fflush(stdout);
        std::this_thread::sleep_for(std::chrono::seconds(3));
        return 0;
    }
    const auto start = Clock::now();
    try {
        for (;;) comm->allreduce(buf.data(), buf.size(), ReduceOp::sum);
    } catch (const Error &e) {
        const double secs = std::chrono::duration<double>(Clock::now() - start).count();
        const std::string what = e.what();
        if (e.code() == ErrorCode::peer_lost && what.find("rank " + std::to_string(victim)) != std::string::npos &&
            secs < 2.5) {
            std::printf("OK %.2f %s\n", secs, what.c_str());
            return 0;
        }
        std::printf("BAD after %.2f s: %s: %s\n", secs, error_code_name(e.code()), what.c_str());
        return 1;
    }
}

int main(int argc, char **argv) {
    if (argc >= 2 && !std::strcmp(argv[1], "join")) return join_mode();
    if (argc >= 3 && !std::strcmp(argv[1], "peer-kill")) return peer_kill_mode(std::atoi(argv[2]));
    if (argc >= 3 && !std::strcmp(argv[1], "peer-exit")) return peer_exit_mode(std::atoi(argv[2]));
    std::fprintf(stderr, "usage: %s join | peer-kill VICTIM | peer-exit VICTIM\n", argv[0]);
    return 2;
}

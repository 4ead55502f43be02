// Conformance runner for multi-process backends: every process of the job runs this. It builds
// the communicator from the environment (tools/shardopt-run, mpirun, srun, torchrun names) and
// runs every conformance case in order; failure cases (timeouts, mismatches) run on a fresh
// split(0, rank) child so the parent survives them. Prints one line per failed case and a
// summary; exits 1 when any case failed on this rank.
//
//   conformance_ucx_main [--filter SUBSTRING] [--skip-failures] [--only-failures]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "conformance_cases.hpp"
#include "shardopt/ucx.hpp"

using namespace shardopt;
using namespace shardopt::conformance;

int main(int argc, char **argv) {
    std::string filter;
    bool collectives = true, failures = true;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--filter") && i + 1 < argc)
            filter = argv[++i];
        else if (!std::strcmp(argv[i], "--skip-failures"))
            failures = false;
        else if (!std::strcmp(argv[i], "--only-failures"))
            collectives = false;
        else {
            std::fprintf(stderr, "usage: %s [--filter SUBSTRING] [--skip-failures] [--only-failures]\n", argv[0]);
            return 2;
        }
    }
    const auto start = std::chrono::steady_clock::now();
    CommunicatorPtr comm;
    try {
        comm = create_communicator_from_env("ucx");
    } catch (const std::exception &e) {
        std::fprintf(stderr, "cannot create the communicator: %s\n", e.what());
        return 1;
    }
    const int rank = comm->rank(), size = comm->size();
    int passed = 0, failed = 0;
    auto run_list = [&](const std::vector<Case> &cases, bool on_child) {
        for (const auto &c : cases) {
            if (size < c.min_size) continue;
            if (!filter.empty() && c.name.find(filter) == std::string::npos) continue;
            const auto t0 = std::chrono::steady_clock::now();
            try {
                if (on_child) {
                    auto child = comm->split(0, rank);
                    c.run(*child);
                } else {
                    c.run(*comm);
                }
                ++passed;
            } catch (const std::exception &e) {
                ++failed;
                std::printf("FAIL %s (rank %d of %d): %s\n", c.name.c_str(), rank, size, e.what());
                std::fflush(stdout);
                if (!comm->abort_reason().empty()) {
                    std::printf("the communicator is aborted; stopping\n");
                    return false;
                }
            }
            const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            if (std::getenv("SHARDOPT_CONFORMANCE_VERBOSE"))
                std::printf("case %s %.0f ms\n", c.name.c_str(), ms);
        }
        return true;
    };
    bool ok = true;
    if (collectives) ok = run_list(collective_cases(), false);
    if (ok && failures) ok = run_list(failure_cases(), true);
    if (ok) {
        try {
            comm->barrier();
        } catch (const std::exception &e) {
            std::printf("FAIL final barrier: %s\n", e.what());
            ++failed;
        }
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("rank %d/%d: %d passed, %d failed in %.1f s\n", rank, size, passed, failed, secs);
    return failed || !ok ? 1 : 0;
}

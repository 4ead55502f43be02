#include "conformance_runner.hpp"

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "conformance_cases.hpp"

namespace shardopt::conformance {

int run_conformance(Communicator &comm, const RunOptions &options) {
    const int rank = comm.rank(), size = comm.size();
    const std::string where = options.label.empty() ? "" : ", " + options.label;
    const bool verbose = std::getenv("SHARDOPT_CONFORMANCE_VERBOSE") != nullptr;
    int passed = 0, failed = 0;
    auto run_list = [&](const std::vector<Case> &cases, bool on_child) {
        for (const auto &c : cases) {
            if (size < c.min_size) continue;
            if (!options.filter.empty() && c.name.find(options.filter) == std::string::npos) continue;
            const auto t0 = std::chrono::steady_clock::now();
            try {
                if (on_child) {
                    auto child = comm.split(0, rank);
                    c.run(*child);
                } else {
                    c.run(comm);
                }
                ++passed;
            } catch (const std::exception &e) {
                ++failed;
                std::printf("FAIL %s (rank %d of %d%s): %s\n", c.name.c_str(), rank, size, where.c_str(), e.what());
                std::fflush(stdout);
                if (!comm.abort_reason().empty()) {
                    std::printf("the communicator is aborted; stopping\n");
                    return false;
                }
            }
            if (verbose)
                std::printf("case %s %.0f ms\n", c.name.c_str(),
                            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        }
        return true;
    };
    bool ok = true;
    if (options.collectives) ok = run_list(collective_cases(), false);
    if (ok && options.failures) ok = run_list(failure_cases(), true);
    if (ok) {
        try {
            comm.barrier();
        } catch (const std::exception &e) {
            std::printf("FAIL final barrier: %s\n", e.what());
            ++failed;
        }
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - options.start).count();
    std::printf("rank %d/%d%s: %d passed, %d failed in %.1f s\n", rank, size,
                options.label.empty() ? "" : (" (" + options.label + ")").c_str(), passed, failed, secs);
    return failed || !ok ? 1 : 0;
}

} // namespace shardopt::conformance

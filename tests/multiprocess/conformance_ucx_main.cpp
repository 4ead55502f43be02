// Conformance runner for multi-process backends: every process of the job runs this. It builds
// the communicator from the environment (tools/shardopt-run, mpirun, srun, torchrun names) and
// runs every conformance case in order; failure cases (timeouts, mismatches) run on a fresh
// split(0, rank) child so the parent survives them. Prints one line per failed case and a
// summary; exits 1 when any case failed on this rank.
//
//   conformance_ucx_main [--filter SUBSTRING] [--skip-failures] [--only-failures]
#include <cstdio>
#include <cstring>

#include "conformance_runner.hpp"
#include "shardopt/ucx.hpp"

using namespace shardopt;
using namespace shardopt::conformance;

int main(int argc, char **argv) {
    RunOptions options;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--filter") && i + 1 < argc)
            options.filter = argv[++i];
        else if (!std::strcmp(argv[i], "--skip-failures"))
            options.failures = false;
        else if (!std::strcmp(argv[i], "--only-failures"))
            options.collectives = false;
        else {
            std::fprintf(stderr, "usage: %s [--filter SUBSTRING] [--skip-failures] [--only-failures]\n", argv[0]);
            return 2;
        }
    }
    CommunicatorPtr comm;
    try {
        comm = create_communicator_from_env("ucx");
    } catch (const std::exception &e) {
        std::fprintf(stderr, "cannot create the communicator: %s\n", e.what());
        return 1;
    }
    return run_conformance(*comm, options);
}

// Runs the conformance suite in one process of a multi-process job (every process calls it):
// the collective cases on `comm`, then the failure cases (timeouts, mismatches) each on a fresh
// split(0, rank) child so the parent survives them. Prints one line per failed case and a
// summary; SHARDOPT_CONFORMANCE_VERBOSE=1 also prints each case's time.
#pragma once

#include <chrono>
#include <string>

#include "shardopt/comm.hpp"

namespace shardopt::conformance {

struct RunOptions {
    std::string filter;        // only cases whose name contains it
    bool collectives = true;   // run the collective cases
    bool failures = true;      // run the failure cases
    std::string label;         // named in each line (the backend), or empty
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now(); // for the summary
};

// The process exit code: 0 when every case passed on this rank, 1 otherwise.
int run_conformance(Communicator &comm, const RunOptions &options);

} // namespace shardopt::conformance

// The backend-independent conformance suite. Each case runs on one rank against any
// Communicator and throws CaseFailure (with a precise message) when the result differs from a
// serial reference computed locally. A backend's runner executes every case on every rank: the
// in-process runner on threads, the UCX runner in separate processes.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "shardopt/comm.hpp"

namespace shardopt::conformance {

struct CaseFailure : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct Case {
    std::string name;
    int min_size = 1;          // cases about disagreement need two ranks
    bool fresh_comm = false;   // the case aborts its communicator (timeouts, mismatches)
    std::function<void(Communicator &)> run;
};

// Every collective x dtype x op x length, in/out of place, split, async, determinism.
std::vector<Case> collective_cases();
// Timeouts and each kind of mismatch; every one needs a communicator of its own.
std::vector<Case> failure_cases();

} // namespace shardopt::conformance

// The in-process backend: N ranks as threads of one process, sharing memory. The embedded
// default, used by tests, the demo, and single-machine users who want no launcher.
#pragma once

#include <functional>
#include <vector>

#include "shardopt/comm.hpp"

namespace shardopt {

// Creates the `size` communicators of one group; communicator r is rank r. Drive each from its
// own thread. Reductions sum in rank order 0..size-1, so results are bitwise reproducible.
std::vector<CommunicatorPtr> make_inprocess_group(int size);

// Runs fn(comm) on one thread per communicator and joins them. If a rank throws, the group is
// aborted so the others fail fast instead of waiting for their timeout, and the error of the rank
// that failed first is rethrown.
void run_on_ranks(const std::vector<CommunicatorPtr> &comms, const std::function<void(Communicator &)> &fn);

// make_inprocess_group(size) + run_on_ranks, for the common case.
void run_inprocess(int size, const std::function<void(Communicator &)> &fn);

} // namespace shardopt

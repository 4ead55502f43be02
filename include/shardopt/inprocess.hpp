// The in-process backend: N ranks as threads of one process, sharing memory. The embedded
// default, used by tests, the demo, and single-machine users who want no launcher.
#pragma once

#include <functional>
#include <vector>

#include "shardopt/comm.hpp"

namespace shardopt {

// Creates the `size` communicators of one group; communicator r is rank r. Drive each from its
// own thread. Reductions sum in rank order 0..size-1, so results are bitwise reproducible.
// host_of_ranks, when given, places rank r on host host_of_ranks[r] (Communicator::host_of_ranks),
// so layers that combine a host's ranks first run as they would across hosts; the data still
// moves through this process's memory. Empty: one host.
std::vector<CommunicatorPtr> make_inprocess_group(int size, const std::vector<int> &host_of_ranks = {});

// Runs fn(comm) on one thread per communicator and joins them. If a rank throws, the group is
// aborted so the others fail fast instead of waiting for their timeout, and the error of the rank
// that failed first is rethrown.
void run_on_ranks(const std::vector<CommunicatorPtr> &comms, const std::function<void(Communicator &)> &fn);

// make_inprocess_group(size) + run_on_ranks, for the common case.
void run_inprocess(int size, const std::function<void(Communicator &)> &fn);

} // namespace shardopt

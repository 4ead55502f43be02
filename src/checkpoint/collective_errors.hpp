// Error agreement for collective checkpoint operations: every rank runs its part, then all
// ranks learn whether any failed, and every rank throws the same Error (code and message of
// the lowest failing rank). A load therefore either changes every rank or none.
#pragma once

#include <exception>
#include <functional>

#include "shardopt/comm.hpp"

namespace shardopt::checkpoint {

// Runs fn, catching its exception; then agrees over comm (collective). Throws on every rank
// when fn threw on any.
void run_agreed(Communicator &comm, const std::function<void()> &fn);

} // namespace shardopt::checkpoint

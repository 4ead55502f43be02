// TEST ONLY: a deterministic stop inside a one-host collective, for the fault tests
// (tests/multiprocess/fault_test.py, the stall_* cases). Armed only in the test build of the
// core (src/test_hooks/stop_at.cpp); the shipped library defines it disarmed for good
// (src/test_hooks/disabled.cpp) and never reads the variable.
//
//   SHARDOPT_TEST_STOP_AT=<point>:<seq>[:kill]
//
// makes the process that has it raise SIGSTOP (with ":kill", SIGKILL) the first time it reaches
// <point> in collective #<seq> of any communicator, after writing one line to stderr:
//   "shardopt test hook: pid <pid> stopping at <point>:<seq>"
// Points:
//   shm     shm_collective: this rank published its header and input and saw every peer's,
//           before reading their inputs
//   cma     cma_collective: after this rank's first process_vm_readv/writev, or its first
//           piece staged or made on the hand-off path
//   attach  UcxComm::attach_shm_arena (seq: the communicator's first collective number, 0 for
//           the world): after the broadcast of the arena's name, before the vote
// The variable is read once, at load time; a disarmed hook costs each point one load and one
// predicted-not-taken branch.
#pragma once

#include <atomic>
#include <cstdint>

namespace shardopt::ucx::test_hook {

enum Point : int { none = 0, shm = 1, cma = 2, attach = 3 };

// The point SHARDOPT_TEST_STOP_AT names; none when unset or once it fired (relaxed: a plain load).
extern std::atomic<int> armed_point;

[[gnu::cold, gnu::noinline]] void reached(Point p, std::uint64_t seq);

inline void stop_point(Point p, std::uint64_t seq) {
    if (__builtin_expect(armed_point.load(std::memory_order_relaxed) == p, 0)) reached(p, seq);
}

} // namespace shardopt::ucx::test_hook

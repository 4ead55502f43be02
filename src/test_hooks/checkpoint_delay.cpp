// TEST ONLY, linked into the test build of the core (shardopt_core_testing), never into the
// shipped library: SHARDOPT_CHECKPOINT_TEST_DELAY_MS (checkpoint/atomic_file.hpp), and
// SHARDOPT_CHECKPOINT_TEST_KILL_AT=n: the process SIGKILLs itself at its n-th delay point (a save
// killed with its data written and its files not yet published).
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <thread>

#include "checkpoint/atomic_file.hpp"

namespace shardopt::checkpoint {

void test_delay_point() {
    static const long delay_ms = [] {
        const char *v = std::getenv("SHARDOPT_CHECKPOINT_TEST_DELAY_MS");
        return v ? std::atol(v) : 0L;
    }();
    static std::atomic<long> reached{0};
    const char *kill_at = std::getenv("SHARDOPT_CHECKPOINT_TEST_KILL_AT");
    if (kill_at && ++reached == std::atol(kill_at)) std::raise(SIGKILL);
    if (delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
}

} // namespace shardopt::checkpoint

// TEST ONLY, linked into the test build of the core (shardopt_core_testing), never into the
// shipped library: SHARDOPT_CHECKPOINT_TEST_DELAY_MS (checkpoint/atomic_file.hpp).
#include <chrono>
#include <cstdlib>
#include <thread>

#include "checkpoint/atomic_file.hpp"

namespace shardopt::checkpoint {

void test_delay_point() {
    static const long delay_ms = [] {
        const char *v = std::getenv("SHARDOPT_CHECKPOINT_TEST_DELAY_MS");
        return v ? std::atol(v) : 0L;
    }();
    if (delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
}

} // namespace shardopt::checkpoint

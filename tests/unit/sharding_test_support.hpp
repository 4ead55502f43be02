// Small helpers shared by the sharded-optimizer unit tests.
#pragma once

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

#include "shardopt/error.hpp"
#include "shardopt/sharded_optimizer.hpp"

namespace shardopt::testing {

inline ShardingOptions with(Strategy s) {
    ShardingOptions o;
    o.strategy = s;
    return o;
}

// Starting parameters for the engine tests: distinct values, none zero.
inline std::vector<float> initial_values(std::size_t n) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = 0.5f * std::sin(0.37f * float(i) + 0.1f);
    return v;
}

// A gradient that depends on the parameters, the rank and the step, so a wrong shard, stale
// parameters, a missed reduction or a gradient that never reached its buffer all change the
// result.
inline float gradient(float w, std::size_t i, int rank, int step) {
    return std::cos(w * float(rank + 1) + 0.1f * float(step)) + 0.01f * float(i % 7) - 0.3f * w;
}

// Boost.Test's assertion macros are not thread-safe (every one, passing or not, updates shared
// counters and the "last checkpoint" string), so rank threads in run_inprocess hold this lock
// around each assertion. Unlocked concurrent assertions corrupted that string once in CI.
inline std::mutex &assertion_mutex() {
    static std::mutex mutex;
    return mutex;
}

// fn() must throw Error with `code` and a message containing `needle`. Safe to call from rank
// threads; the caller must not hold assertion_mutex().
template <typename Fn> void expect_error(ErrorCode code, const std::string &needle, Fn fn) {
    try {
        fn();
    } catch (const Error &e) {
        std::lock_guard<std::mutex> lock(assertion_mutex());
        BOOST_TEST(int(e.code()) == int(code), "got " << error_code_name(e.code()) << ": " << e.what());
        BOOST_TEST(std::string(e.what()).find(needle) != std::string::npos, "message: " << e.what());
        return;
    }
    std::lock_guard<std::mutex> lock(assertion_mutex());
    BOOST_FAIL("expected an error containing '" << needle << "'");
}

} // namespace shardopt::testing

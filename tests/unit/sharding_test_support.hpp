// Small helpers shared by the sharded-optimizer unit tests.
#pragma once

#include <boost/test/unit_test.hpp>

#include <mutex>
#include <string>

#include "shardopt/error.hpp"
#include "shardopt/sharded_optimizer.hpp"

namespace shardopt::testing {

inline ShardingOptions with(Strategy s) {
    ShardingOptions o;
    o.strategy = s;
    return o;
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

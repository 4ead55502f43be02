// Small helpers shared by the sharded-optimizer unit tests.
#pragma once

#include <boost/test/unit_test.hpp>

#include <string>

#include "shardopt/error.hpp"
#include "shardopt/sharded_optimizer.hpp"

namespace shardopt::testing {

inline ShardingOptions with(Strategy s) {
    ShardingOptions o;
    o.strategy = s;
    return o;
}

// fn() must throw Error with `code` and a message containing `needle`.
template <typename Fn> void expect_error(ErrorCode code, const std::string &needle, Fn fn) {
    try {
        fn();
    } catch (const Error &e) {
        BOOST_TEST(int(e.code()) == int(code), "got " << error_code_name(e.code()) << ": " << e.what());
        BOOST_TEST(std::string(e.what()).find(needle) != std::string::npos, "message: " << e.what());
        return;
    }
    BOOST_FAIL("expected an error containing '" << needle << "'");
}

} // namespace shardopt::testing

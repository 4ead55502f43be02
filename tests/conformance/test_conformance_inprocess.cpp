// Runs the conformance suite on the in-process backend: one Boost.Test suite per world size
// (ws1 .. ws8), one test case per conformance case, every rank on its own thread.
#include <boost/test/unit_test.hpp>

#include "conformance_cases.hpp"
#include "shardopt/inprocess.hpp"

using namespace shardopt;
using namespace shardopt::conformance;
namespace utf = boost::unit_test;

namespace {

void run_case(const Case &c, int world_size) {
    try {
        run_inprocess(world_size, c.run);
    } catch (const std::exception &e) {
        BOOST_FAIL(c.name << " at world size " << world_size << ": " << e.what());
    }
}

bool init_suite() {
    auto collectives = collective_cases();
    auto failures = failure_cases();
    for (int ws = 1; ws <= 8; ++ws) {
        auto *suite = BOOST_TEST_SUITE("ws" + std::to_string(ws));
        for (const auto &list : {collectives, failures})
            for (const auto &c : list) {
                if (ws < c.min_size) continue;
                suite->add(utf::make_test_case([c, ws] { run_case(c, ws); }, c.name, __FILE__, __LINE__));
            }
        utf::framework::master_test_suite().add(suite);
    }
    return true;
}

} // namespace

int main(int argc, char *argv[]) { return utf::unit_test_main(&init_suite, argc, argv); }

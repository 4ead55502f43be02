// The clock keeper's rules on thousands of random schedules: workers of random speeds push when
// they finish a step, the keeper decides; every gradient is applied exactly once, none more than
// s clocks stale, no worker runs more than s clocks ahead of its parameters, staleness 0 is
// lockstep, and the session always ends (the keeper never waits with no worker computing).
#define BOOST_TEST_MODULE shardopt clock keeper
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "async/clock_keeper.hpp"
#include "shardopt/error.hpp"

using namespace shardopt;
using namespace shardopt::async;

namespace {

struct Outcome {
    double end = 0; // the time the last version was handed out
    std::int64_t applies = 0, late = 0, pushes = 0;
    int max_staleness = 0, max_lead = 0;
    std::vector<std::int64_t> steps; // per worker
};

// Simulates one session: worker w takes `speed[w]` time units per step, times a random factor in
// [1 - jitter, 1 + jitter].
Outcome simulate(int workers, int s, int clocks, const std::vector<double> &speed, std::mt19937 &rng,
                 double jitter_range = 0.5) {
    std::vector<std::int64_t> samples(static_cast<std::size_t>(clocks));
    for (int c = 0; c < clocks; ++c) samples[std::size_t(c)] = 10 + c;
    ClockKeeper keeper(workers, s, samples);
    struct Step {
        bool computing = true;
        std::int64_t label = 0, version = 0, seq = 0;
        double done_at = 0;
    };
    std::uniform_real_distribution<double> jitter(1.0 - jitter_range, 1.0 + jitter_range);
    std::vector<Step> step(static_cast<std::size_t>(workers));
    double now = 0;
    for (int w = 0; w < workers; ++w) step[std::size_t(w)].done_at = speed[std::size_t(w)] * jitter(rng);
    std::set<std::pair<int, std::int64_t>> pushed, applied;
    Outcome out;
    out.steps.assign(std::size_t(workers), 0);
    std::map<std::pair<int, std::int64_t>, std::int64_t> version_of; // (worker, seq) -> version computed on
    std::int64_t version = 0;
    while (!keeper.finished()) {
        const Decision d = keeper.next();
        if (d.kind == Decision::Kind::apply) {
            BOOST_REQUIRE_EQUAL(d.clock, version);
            BOOST_REQUIRE(!d.members.empty());
            // One update per clock, of gradients pushed and never applied before, each at most s stale.
            for (const Push &p : d.members) {
                BOOST_REQUIRE(pushed.count({p.worker, p.seq}));
                BOOST_REQUIRE_MESSAGE(applied.insert({p.worker, p.seq}).second, "a gradient applied twice");
                BOOST_REQUIRE_LE(p.label, d.clock);
                BOOST_REQUIRE_LE(d.clock - p.version, s);
                out.max_staleness = std::max(out.max_staleness, int(d.clock - p.version));
                if (p.label < d.clock) ++out.late;
            }
            if (s == 0) { // lockstep: every worker's gradient of this very clock
                BOOST_REQUIRE_EQUAL(int(d.members.size()), workers);
                for (int i = 0; i < workers; ++i) {
                    BOOST_REQUIRE_EQUAL(d.members[std::size_t(i)].worker, i);
                    BOOST_REQUIRE_EQUAL(d.members[std::size_t(i)].label, d.clock);
                    BOOST_REQUIRE_EQUAL(d.members[std::size_t(i)].version, d.clock);
                }
            }
            ++version;
            ++out.applies;
            // Apply bound: nobody still computes on a version more than s behind the next clock.
            for (const Step &st : step)
                if (st.computing) BOOST_REQUIRE_LE(version - st.version, s);
            continue;
        }
        if (d.kind == Decision::Kind::serve) {
            Step &st = step[std::size_t(d.worker)];
            BOOST_REQUIRE(!st.computing);
            BOOST_REQUIRE_EQUAL(d.clock, version);
            if (d.label >= clocks) {
                BOOST_REQUIRE_EQUAL(version, clocks); // done only with the last version
                continue;
            }
            BOOST_REQUIRE_GT(d.label, st.label);       // labels only go up
            BOOST_REQUIRE_LE(d.label - d.clock, s);     // read bound
            out.max_lead = std::max(out.max_lead, int(d.label - d.clock));
            st.computing = true;
            st.label = d.label;
            st.version = d.clock;
            st.done_at = now + speed[std::size_t(d.worker)] * jitter(rng);
            continue;
        }
        // Waiting: some worker must be computing, or the session would hang.
        int next = -1;
        for (int w = 0; w < workers; ++w)
            if (step[std::size_t(w)].computing && (next < 0 || step[std::size_t(w)].done_at < step[std::size_t(next)].done_at))
                next = w;
        BOOST_REQUIRE_MESSAGE(next >= 0, "the keeper waits while no worker computes");
        Step &st = step[std::size_t(next)];
        now = st.done_at;
        st.computing = false;
        keeper.pushed(Push{next, st.seq, st.label, st.version, 1.0 + next});
        pushed.insert({next, st.seq});
        ++st.seq;
        ++out.steps[std::size_t(next)];
        ++out.pushes;
    }
    BOOST_REQUIRE_EQUAL(version, clocks);
    BOOST_REQUIRE(applied == pushed); // none dropped
    out.end = now;
    BOOST_REQUIRE_EQUAL(keeper.late_gradients(), out.late);
    BOOST_REQUIRE_EQUAL(keeper.max_staleness(), out.max_staleness);
    BOOST_REQUIRE_EQUAL(keeper.max_lead(), out.max_lead);
    return out;
}

} // namespace

BOOST_AUTO_TEST_CASE(random_schedules_keep_every_rule) {
    std::mt19937 rng(1234);
    std::uniform_real_distribution<double> speed_of(0.2, 5.0);
    int runs = 0;
    for (int workers : {1, 2, 3, 4, 7})
        for (int s : {0, 1, 2, 4})
            for (int clocks : {1, 2, 5, 40})
                for (int trial = 0; trial < 40; ++trial, ++runs) {
                    std::vector<double> speed(static_cast<std::size_t>(workers));
                    for (double &v : speed) v = speed_of(rng);
                    simulate(workers, s, clocks, speed, rng);
                }
    BOOST_TEST(runs == 3200);
}

// A worker 3x slower than the others: at staleness 0 everyone goes at its pace, in lockstep; at
// staleness 2 or 4 the others keep their own pace (the session takes about one of their steps per
// clock), the slow one skips the clocks it missed, and at 2, where it lags more than the bound
// lets the clock wait for it, its gradients arrive late and join later updates.
BOOST_AUTO_TEST_CASE(a_straggler_does_not_hold_the_others_back) {
    std::mt19937 rng(7);
    const int clocks = 300;
    const std::vector<double> speed = {1.0, 1.0, 1.0, 3.0};
    const Outcome sync = simulate(4, 0, clocks, speed, rng, 0.0);
    BOOST_TEST(sync.end >= 3.0 * clocks);
    for (int w = 0; w < 4; ++w) BOOST_TEST(sync.steps[std::size_t(w)] == clocks);
    BOOST_TEST(sync.late == 0);
    for (int s : {2, 4}) {
        const Outcome async = simulate(4, s, clocks, speed, rng, 0.0);
        BOOST_TEST(async.end <= 1.02 * clocks + 3 * s, "staleness " << s << ": ends at " << async.end);
        for (int w = 0; w < 3; ++w) BOOST_TEST(async.steps[std::size_t(w)] == clocks);
        BOOST_TEST(async.steps[3] <= clocks / 3 + 1);
        BOOST_TEST(async.steps[3] >= clocks / 4);
        BOOST_TEST(async.max_staleness <= s);
        if (s == 2) BOOST_TEST(async.late >= clocks / 4);
    }
}

BOOST_AUTO_TEST_CASE(a_push_the_keeper_did_not_hand_out_is_a_protocol_error) {
    ClockKeeper keeper(2, 1, {8, 8, 8});
    keeper.pushed(Push{0, 0, 0, 0, 1.0});
    BOOST_CHECK_THROW(keeper.pushed(Push{0, 1, 1, 0, 1.0}), Error); // not computing: it waits for a version
    BOOST_CHECK_THROW(keeper.pushed(Push{1, 0, 1, 0, 1.0}), Error); // handed label 0, pushed label 1
    BOOST_CHECK_THROW(keeper.pushed(Push{5, 0, 0, 0, 1.0}), Error); // no such worker
    BOOST_CHECK_THROW(ClockKeeper(2, 1, {}), Error);                // a session has a clock
}

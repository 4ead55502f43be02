// The schedules' action lists on their own: complete, deadlock-free when run as the runner runs
// them (each rank in list order, waiting for its inputs), and with the peak activations and the
// bubble their theory gives, measured by an event simulation.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <map>
#include <set>

#include "shardopt/error.hpp"
#include "shardopt/pipeline_schedule.hpp"

using namespace shardopt;

namespace {

struct Simulated {
    double span = 0;             // end of the last action anywhere
    std::vector<int> peak;       // per rank
    double bubble = 0;           // 1 - busy / (p * span)
};

// Runs every rank's list with forward time tf and backward time tb per chunk and free messages.
Simulated simulate(const PipelineShape &s, double tf, double tb) {
    const int p = s.stages, chunks = s.chunks();
    std::vector<std::vector<PipelineAction>> lists;
    for (int r = 0; r < p; ++r) lists.push_back(pipeline_actions(s, r));
    std::map<std::tuple<int, int, int>, double> done; // (kind, mb, model chunk) -> end time
    std::vector<std::size_t> next(std::size_t(p), 0);
    std::vector<double> free_at(std::size_t(p), 0.0);
    std::vector<int> held(std::size_t(p), 0);
    Simulated out;
    out.peak.assign(std::size_t(p), 0);
    for (bool progress = true; progress;) {
        progress = false;
        for (int r = 0; r < p; ++r) {
            while (next[std::size_t(r)] < lists[std::size_t(r)].size()) {
                const PipelineAction a = lists[std::size_t(r)][next[std::size_t(r)]];
                const int k = a.chunk * p + r;
                double ready = free_at[std::size_t(r)];
                std::tuple<int, int, int> dep;
                bool has_dep = false;
                if (a.kind == PipelineAction::forward && k > 0) dep = {0, a.micro_batch, k - 1}, has_dep = true;
                if (a.kind == PipelineAction::backward) {
                    BOOST_REQUIRE(done.count({0, a.micro_batch, k})); // its own forward ran before
                    if (k < chunks - 1) dep = {1, a.micro_batch, k + 1}, has_dep = true;
                }
                if (has_dep) {
                    auto it = done.find(dep);
                    if (it == done.end()) break; // waits for a message
                    ready = std::max(ready, it->second);
                }
                const double end = ready + (a.kind == PipelineAction::forward ? tf : tb);
                done[{int(a.kind), a.micro_batch, k}] = end;
                free_at[std::size_t(r)] = end;
                int &h = held[std::size_t(r)];
                h += a.kind == PipelineAction::forward ? 1 : -1;
                out.peak[std::size_t(r)] = std::max(out.peak[std::size_t(r)], h);
                out.span = std::max(out.span, end);
                ++next[std::size_t(r)];
                progress = true;
            }
        }
    }
    for (int r = 0; r < p; ++r)
        BOOST_REQUIRE_MESSAGE(next[std::size_t(r)] == lists[std::size_t(r)].size(),
                              pipeline_schedule_name(s.schedule) << " deadlocks: rank " << r << " stuck at action "
                                                                << next[std::size_t(r)]);
    const double busy = double(p) * s.micro_batches * s.virtual_stages * (tf + tb);
    out.bubble = 1.0 - busy / (p * out.span);
    return out;
}

PipelineShape shape(PipelineSchedule schedule, int p, int m, int v = 1) {
    PipelineShape s;
    s.schedule = schedule;
    s.stages = p;
    s.micro_batches = m;
    s.virtual_stages = v;
    return s;
}

} // namespace

BOOST_AUTO_TEST_SUITE(schedule)

BOOST_AUTO_TEST_CASE(every_action_once_backward_after_forward) {
    for (auto sched : {PipelineSchedule::gpipe, PipelineSchedule::one_f_one_b, PipelineSchedule::interleaved_1f1b})
        for (int p : {1, 2, 3, 4, 8})
            for (int m : {1, 2, 4, 8, 12}) {
                const int v = sched == PipelineSchedule::interleaved_1f1b ? 2 : 1;
                if (v > 1 && m % p) continue;
                const auto s = shape(sched, p, m, v);
                for (int r = 0; r < p; ++r) {
                    const auto a = pipeline_actions(s, r);
                    BOOST_TEST_INFO(pipeline_schedule_name(sched) << " p=" << p << " m=" << m << " r=" << r << ": "
                                                                  << describe(a));
                    BOOST_TEST(a.size() == std::size_t(2 * m * v));
                    std::set<std::tuple<int, int, int>> seen;
                    for (const auto &x : a) {
                        BOOST_TEST(seen.insert({int(x.kind), x.micro_batch, x.chunk}).second);
                        if (x.kind == PipelineAction::backward)
                            BOOST_TEST(seen.count({int(PipelineAction::forward), x.micro_batch, x.chunk}) == 1u);
                    }
                }
            }
}

BOOST_AUTO_TEST_CASE(known_orders) {
    // 1F1B, 4 stages, 6 micro-batches: rank 0 warms up with 3 forwards, rank 3 with none.
    auto s = shape(PipelineSchedule::one_f_one_b, 4, 6);
    BOOST_TEST(describe(pipeline_actions(s, 0)) == "F0.0 F1.0 F2.0 F3.0 B0.0 F4.0 B1.0 F5.0 B2.0 B3.0 B4.0 B5.0");
    BOOST_TEST(describe(pipeline_actions(s, 3)) == "F0.0 B0.0 F1.0 B1.0 F2.0 B2.0 F3.0 B3.0 F4.0 B4.0 F5.0 B5.0");
    s.schedule = PipelineSchedule::gpipe;
    BOOST_TEST(describe(pipeline_actions(s, 2)) == "F0.0 F1.0 F2.0 F3.0 F4.0 F5.0 B0.0 B1.0 B2.0 B3.0 B4.0 B5.0");
    // Interleaved, 2 stages x 2 chunks, 4 micro-batches: groups of 2 micro-batches per chunk.
    s = shape(PipelineSchedule::interleaved_1f1b, 2, 4, 2);
    BOOST_TEST(describe(pipeline_actions(s, 0)) ==
               "F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 B2.1 B3.1 B2.0 B3.0");
}

BOOST_AUTO_TEST_CASE(peak_activations_match_theory) {
    for (int p : {2, 3, 4, 8})
        for (int m : {1, 2, 4, 8, 16}) {
            auto g = shape(PipelineSchedule::gpipe, p, m), f = shape(PipelineSchedule::one_f_one_b, p, m);
            const auto sg = simulate(g, 1, 2), sf = simulate(f, 1, 2);
            for (int r = 0; r < p; ++r) {
                BOOST_TEST_INFO("p=" << p << " m=" << m << " r=" << r);
                BOOST_TEST(sg.peak[std::size_t(r)] == m); // GPipe: every micro-batch in flight
                BOOST_TEST(sf.peak[std::size_t(r)] == std::min(p - r, m)); // 1F1B: at most p
                BOOST_TEST(pipeline_peak_activations(g, r) == m);
                BOOST_TEST(pipeline_peak_activations(f, r) == std::min(p - r, m));
            }
            if (m % p) continue;
            for (int v : {2, 3}) {
                auto i = shape(PipelineSchedule::interleaved_1f1b, p, m, v);
                const auto si = simulate(i, 1.0 / v, 2.0 / v);
                for (int r = 0; r < p; ++r) {
                    BOOST_TEST_INFO("interleaved p=" << p << " m=" << m << " v=" << v << " r=" << r);
                    BOOST_TEST(si.peak[std::size_t(r)] == pipeline_peak_activations(i, r));
                    BOOST_TEST(pipeline_peak_activations(i, r) <= m * v);
                }
            }
        }
}

BOOST_AUTO_TEST_CASE(bubble_matches_theory) {
    for (int p : {2, 4, 8})
        for (int m : {4, 8, 16}) {
            for (auto sched : {PipelineSchedule::gpipe, PipelineSchedule::one_f_one_b}) {
                auto s = shape(sched, p, m);
                BOOST_TEST_INFO(pipeline_schedule_name(sched) << " p=" << p << " m=" << m);
                BOOST_TEST(simulate(s, 1, 2).bubble == pipeline_bubble_fraction(s), boost::test_tools::tolerance(1e-12));
                BOOST_TEST(pipeline_bubble_fraction(s) == double(p - 1) / (m + p - 1), boost::test_tools::tolerance(1e-12));
            }
            if (m % p) continue;
            for (int v : {2, 4}) {
                auto s = shape(PipelineSchedule::interleaved_1f1b, p, m, v);
                BOOST_TEST_INFO("interleaved p=" << p << " m=" << m << " v=" << v);
                // Forward and backward of a chunk take 1/v of the stage's: the bubble shrinks v-fold.
                BOOST_TEST(simulate(s, 1.0 / v, 2.0 / v).bubble == pipeline_bubble_fraction(s),
                           boost::test_tools::tolerance(1e-9));
                BOOST_TEST(pipeline_bubble_fraction(s) == double(p - 1) / (v * m + p - 1),
                           boost::test_tools::tolerance(1e-12));
            }
        }
}

BOOST_AUTO_TEST_CASE(bad_shapes_refused) {
    auto code = [](const PipelineShape &s) {
        try {
            pipeline_actions(s, 0);
        } catch (const Error &e) {
            return e.code();
        }
        return ErrorCode::ok;
    };
    BOOST_TEST(int(code(shape(PipelineSchedule::one_f_one_b, 0, 4))) == int(ErrorCode::invalid_argument));
    BOOST_TEST(int(code(shape(PipelineSchedule::one_f_one_b, 2, 0))) == int(ErrorCode::invalid_argument));
    BOOST_TEST(int(code(shape(PipelineSchedule::one_f_one_b, 2, 4, 2))) == int(ErrorCode::invalid_argument));
    BOOST_TEST(int(code(shape(PipelineSchedule::interleaved_1f1b, 2, 4, 1))) == int(ErrorCode::invalid_argument));
    BOOST_TEST(int(code(shape(PipelineSchedule::interleaved_1f1b, 4, 6, 2))) == int(ErrorCode::invalid_argument));
    BOOST_TEST(int(code(shape(PipelineSchedule(7), 2, 4))) == int(ErrorCode::invalid_argument));
    BOOST_CHECK_THROW(pipeline_actions(shape(PipelineSchedule::gpipe, 2, 4), 2), Error);
}

BOOST_AUTO_TEST_SUITE_END()

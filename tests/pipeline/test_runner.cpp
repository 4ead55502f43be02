// The runner measured against the schedules' theory with a stage whose compute is a sleep:
// bubble fraction and peak activations per stage; and its errors.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <thread>

#include "shardopt/error.hpp"
#include "shardopt/inprocess.hpp"
#include "shardopt/pipeline.hpp"

using namespace shardopt;

namespace {

// Each chunk holds one parameter; forward sleeps forward_ms / v, backward backward_ms / v.
class SleepStage : public PipelineStage {
  public:
    SleepStage(double forward_ms, double backward_ms, int v) : f_(forward_ms / v), b_(backward_ms / v) {}
    double forward(const StageCall &call, const Activation &, Activation &output) override {
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(f_));
        if (call.last) return 1.0;
        static_cast<double *>(output.resize(width))[0] = 1.0;
        return 0.0;
    }
    void backward(const StageCall &call, const Activation &, const Activation &, Activation &input_grad) override {
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(b_));
        static_cast<double *>(call.grad(call.chunk))[0] += 1.0;
        if (!call.first) static_cast<double *>(input_grad.data())[0] = 0.0;
    }
    std::size_t width = 4;

  private:
    double f_, b_;
};

ParameterSet chunk_layout(int rank, int v) {
    ParameterSet layout(DType::f64);
    for (int c = 0; c < v; ++c) {
        layout.add("chunk" + std::to_string(rank) + "." + std::to_string(c), 1);
        layout.end_bucket();
    }
    return layout;
}

ShardingOptions hybrid(int pp) {
    ShardingOptions o;
    o.strategy = Strategy::hybrid;
    o.pipeline_parallel_size = pp;
    return o;
}

struct Measured {
    double bubble = 1.0;          // the best of the batches run
    std::vector<int> peak;        // per stage
    std::vector<int> sends, recvs;
};

Measured measure(PipelineSchedule schedule, int p, int m, int v, int batches) {
    Measured out;
    out.peak.assign(std::size_t(p), 0);
    out.sends = out.recvs = out.peak;
    std::mutex mu;
    run_inprocess(p, [&](Communicator &comm) {
        SleepStage stage(8.0, 16.0, v);
        auto opt = ShardedOptimizer::create(comm.shared_from_this(), chunk_layout(comm.rank(), v),
                                            OptimizerOptions::defaults(OptimizerKind::sgd), hybrid(p));
        PipelineRunner runner(*opt, stage, {m, schedule, v});
        for (int b = 0; b < batches; ++b) {
            const auto r = runner.run_batch();
            std::lock_guard<std::mutex> lock(mu);
            out.bubble = std::min(out.bubble, r.bubble_fraction);
            out.peak[std::size_t(comm.rank())] = r.peak_activations;
            out.sends[std::size_t(comm.rank())] = r.sends;
            out.recvs[std::size_t(comm.rank())] = r.recvs;
        }
    });
    return out;
}

ErrorCode code_of(const std::function<void()> &f) {
    try {
        f();
    } catch (const Error &e) {
        return e.code();
    }
    return ErrorCode::ok;
}

} // namespace

BOOST_AUTO_TEST_SUITE(runner)

// GPipe keeps every micro-batch in flight, 1F1B at most p - r; both idle (p-1)/(m+p-1) of the
// span; interleaving v chunks shrinks the bubble to (p-1)/(vm+p-1). Sleeps stand for compute;
// the runner's own time (messages, thread wake-ups) only adds idle time, hence the one-sided slack.
BOOST_AUTO_TEST_CASE(bubble_and_peak_activations_match_theory) {
    const int p = 4, m = 8;
    for (auto [schedule, v] : {std::pair{PipelineSchedule::gpipe, 1}, std::pair{PipelineSchedule::one_f_one_b, 1},
                               std::pair{PipelineSchedule::interleaved_1f1b, 2}}) {
        PipelineShape shape{schedule, p, m, v};
        const Measured got = measure(schedule, p, m, v, 5); // the best of 5: a loaded machine only adds idle time
        const double theory = pipeline_bubble_fraction(shape);
        BOOST_TEST_MESSAGE(pipeline_schedule_name(schedule) << ": bubble " << got.bubble << ", theory " << theory);
        BOOST_TEST_INFO(pipeline_schedule_name(schedule) << ": bubble " << got.bubble << ", theory " << theory);
        BOOST_TEST(got.bubble >= theory - 0.03);
        BOOST_TEST(got.bubble <= theory + 0.06);
        for (int r = 0; r < p; ++r) {
            BOOST_TEST_INFO(pipeline_schedule_name(schedule) << " stage " << r);
            BOOST_TEST(got.peak[std::size_t(r)] == pipeline_peak_activations(shape, r));
            if (schedule == PipelineSchedule::gpipe) BOOST_TEST(got.peak[std::size_t(r)] == m);
            if (schedule == PipelineSchedule::one_f_one_b) BOOST_TEST(got.peak[std::size_t(r)] == std::min(p - r, m));
            // One activation out and one gradient back per micro-batch and chunk boundary.
            const int boundaries_out = v - (r == p - 1 ? 1 : 0), boundaries_in = v - (r == 0 ? 1 : 0);
            BOOST_TEST(got.sends[std::size_t(r)] == m * (boundaries_out + boundaries_in));
            BOOST_TEST(got.recvs[std::size_t(r)] == m * (boundaries_out + boundaries_in));
        }
    }
}

// One update per batch on the mean gradient: SGD lr 0.1, every micro-batch's gradient 1.
BOOST_AUTO_TEST_CASE(one_update_per_batch_on_the_mean_gradient) {
    // Rank threads only record (Boost.Test's assertions are not thread-safe); the checks follow.
    struct Seen {
        int applied = 0;
        std::vector<double> losses;
        std::int64_t steps = 0;
        double w = 0;
    };
    std::vector<Seen> seen(2);
    run_inprocess(2, [&](Communicator &comm) {
        SleepStage stage(0, 0, 1);
        auto sgd = OptimizerOptions::defaults(OptimizerKind::sgd);
        sgd.lr = 0.1;
        auto opt = ShardedOptimizer::create(comm.shared_from_this(), chunk_layout(comm.rank(), 1), sgd, hybrid(2));
        PipelineRunner runner(*opt, stage, {4, PipelineSchedule::one_f_one_b, 1});
        Seen &mine = seen[std::size_t(comm.rank())];
        for (int b = 0; b < 3; ++b) {
            const auto r = runner.run_batch();
            mine.applied += r.step.applied ? 1 : 0;
            mine.losses.push_back(r.loss);
        }
        mine.steps = opt->step_count();
        opt->get_parameters(&mine.w);
    });
    for (const Seen &s : seen) {
        BOOST_TEST(s.applied == 3);
        for (double loss : s.losses) BOOST_TEST(loss == 1.0); // the mean of the last chunk's losses
        BOOST_TEST(s.steps == 3);
        BOOST_TEST(std::abs(s.w + 0.3) <= 1e-15);
    }
}

BOOST_AUTO_TEST_CASE(errors) {
    // Stages that disagree on the schedule.
    std::vector<ErrorCode> disagreed(2, ErrorCode::ok);
    run_inprocess(2, [&](Communicator &comm) {
        SleepStage stage(0, 0, 1);
        auto opt = ShardedOptimizer::create(comm.shared_from_this(), chunk_layout(comm.rank(), 1),
                                            OptimizerOptions::defaults(OptimizerKind::sgd), hybrid(2));
        const int m = comm.rank() == 0 ? 4 : 2;
        disagreed[std::size_t(comm.rank())] =
            code_of([&] { PipelineRunner(*opt, stage, {m, PipelineSchedule::gpipe, 1}); });
    });
    for (ErrorCode code : disagreed) BOOST_TEST(int(code) == int(ErrorCode::mismatch));
    // The optimizer accumulating on its own; bad schedule shape.
    run_inprocess(1, [&](Communicator &comm) {
        SleepStage stage(0, 0, 1);
        ShardingOptions o;
        o.gradient_accumulation_steps = 2;
        auto opt = ShardedOptimizer::create(comm.shared_from_this(), chunk_layout(0, 1),
                                            OptimizerOptions::defaults(OptimizerKind::sgd), o);
        BOOST_TEST(int(code_of([&] { PipelineRunner(*opt, stage, {4, PipelineSchedule::gpipe, 1}); })) ==
                   int(ErrorCode::invalid_argument));
        o.gradient_accumulation_steps = 1;
        auto ok = ShardedOptimizer::create(comm.shared_from_this(), chunk_layout(0, 1),
                                           OptimizerOptions::defaults(OptimizerKind::sgd), o);
        BOOST_TEST(int(code_of([&] { PipelineRunner(*ok, stage, {4, PipelineSchedule::gpipe, 2}); })) ==
                   int(ErrorCode::invalid_argument));
    });
    // A stage that throws: its neighbour stops with the reason at once, not at its timeout.
    std::atomic<int> failed{0};
    const auto t0 = std::chrono::steady_clock::now();
    run_inprocess(2, [&](Communicator &comm) {
        struct Throwing : SleepStage {
            Throwing() : SleepStage(0, 0, 1) {}
            double forward(const StageCall &call, const Activation &in, Activation &out) override {
                if (call.model_chunk == 1 && call.micro_batch == 1) throw Error(ErrorCode::invalid_argument, "bad sample");
                return SleepStage::forward(call, in, out);
            }
        } stage;
        auto opt = ShardedOptimizer::create(comm.shared_from_this(), chunk_layout(comm.rank(), 1),
                                            OptimizerOptions::defaults(OptimizerKind::sgd), hybrid(2));
        PipelineRunner runner(*opt, stage, {4, PipelineSchedule::one_f_one_b, 1});
        try {
            runner.run_batch();
        } catch (const Error &e) {
            if (std::string(e.what()).find("bad sample") != std::string::npos) ++failed;
        }
    });
    BOOST_TEST(failed.load() == 2);
    BOOST_TEST(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 10.0);
    // An activation whose size changes after the first batch.
    std::atomic<int> mismatches{0};
    run_inprocess(2, [&](Communicator &comm) {
        SleepStage stage(0, 0, 1);
        auto opt = ShardedOptimizer::create(comm.shared_from_this(), chunk_layout(comm.rank(), 1),
                                            OptimizerOptions::defaults(OptimizerKind::sgd), hybrid(2));
        PipelineRunner runner(*opt, stage, {2, PipelineSchedule::gpipe, 1});
        runner.run_batch();
        stage.width = 5;
        try {
            runner.run_batch();
        } catch (const Error &e) {
            if (e.code() == ErrorCode::mismatch) ++mismatches;
        }
    });
    BOOST_TEST(mismatches.load() == 2);
}

BOOST_AUTO_TEST_SUITE_END()

// Pipeline schedules side by side: step time, measured bubble and peak activations per stage of
// GPipe, 1F1B and interleaved 1F1B, on in-process ranks whose compute is a sleep of a fixed
// time per stage (forward f ms, backward b ms; a chunk of an interleaved stage sleeps 1/v of it).
//   bench_pipeline [--stages 4] [--micro-batches 4,8,16] [--forward-ms 10] [--backward-ms 20]
//                  [--virtual 2] [--batches 5]
// Prints one `name=pipeline ...` line per schedule and micro-batch count, with the theory's
// bubble (p-1)/(vm+p-1) and step time (vm+p-1)(f+b)/v next to what was measured.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "parse_list.hpp"
#include "shardopt/inprocess.hpp"
#include "shardopt/pipeline.hpp"

using namespace shardopt;

namespace {

class SleepStage : public PipelineStage {
  public:
    SleepStage(double forward_ms, double backward_ms) : f_(forward_ms), b_(backward_ms) {}
    double forward(const StageCall &call, const Activation &, Activation &output) override {
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(f_));
        if (!call.last) std::memset(output.resize(1024), 0, 1024 * sizeof(float)); // a 4 KiB activation
        return 0.0;
    }
    void backward(const StageCall &call, const Activation &input, const Activation &, Activation &input_grad) override {
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(b_));
        static_cast<float *>(call.grad(call.chunk))[0] += 1.0f;
        if (!call.first) std::memset(input_grad.data(), 0, input.count() * sizeof(float));
    }

  private:
    double f_, b_;
};

struct Row {
    double step_ms = 0, bubble = 0;
    int peak_first = 0, peak_last = 0;
};

Row run(PipelineSchedule schedule, int p, int m, int v, double f, double b, int batches) {
    std::vector<double> step_ms;
    Row row;
    std::mutex mu;
    run_inprocess(p, [&](Communicator &comm) {
        ParameterSet layout(DType::f32);
        for (int c = 0; c < v; ++c) {
            layout.add("stage" + std::to_string(comm.rank()) + ".chunk" + std::to_string(c), 1024);
            layout.end_bucket();
        }
        ShardingOptions o;
        o.strategy = Strategy::hybrid;
        o.pipeline_parallel_size = p;
        auto opt = ShardedOptimizer::create(comm.shared_from_this(), layout, OptimizerOptions::defaults(OptimizerKind::adam), o);
        SleepStage stage(f / v, b / v);
        PipelineRunner runner(*opt, stage, {m, schedule, v});
        runner.run_batch(); // the first batch agrees the activation sizes
        for (int i = 0; i < batches; ++i) {
            const auto t0 = std::chrono::steady_clock::now();
            const auto r = runner.run_batch();
            const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            std::lock_guard<std::mutex> lock(mu);
            if (comm.rank() == 0) step_ms.push_back(ms), row.bubble += r.bubble_fraction / batches;
            if (comm.rank() == 0) row.peak_first = r.peak_activations;
            if (comm.rank() == p - 1) row.peak_last = r.peak_activations;
        }
    });
    std::sort(step_ms.begin(), step_ms.end());
    row.step_ms = step_ms[step_ms.size() / 2];
    return row;
}

} // namespace

int main(int argc, char **argv) {
    int p = 4, v = 2, batches = 5;
    double f = 10, b = 20;
    std::vector<long> ms = {4, 8, 16};
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string k = argv[i], val = argv[i + 1];
        if (k == "--stages") p = std::stoi(val);
        else if (k == "--micro-batches") ms = bench::parse_list(val);
        else if (k == "--forward-ms") f = std::stod(val);
        else if (k == "--backward-ms") b = std::stod(val);
        else if (k == "--virtual") v = std::stoi(val);
        else if (k == "--batches") batches = std::stoi(val);
        else {
            std::fprintf(stderr, "unknown option %s\n", k.c_str());
            return 2;
        }
    }
    for (long m : ms)
        for (auto [schedule, vs] : {std::pair{PipelineSchedule::gpipe, 1}, std::pair{PipelineSchedule::one_f_one_b, 1},
                                    std::pair{PipelineSchedule::interleaved_1f1b, v}}) {
            if (vs > 1 && m % p) continue;
            const PipelineShape shape{schedule, p, int(m), vs};
            const Row r = run(schedule, p, int(m), vs, f, b, batches);
            const double theory_ms = (double(vs) * m + p - 1) * (f + b) / vs;
            std::printf("name=pipeline schedule=%s stages=%d micro_batches=%ld virtual=%d forward_ms=%g backward_ms=%g "
                        "step_ms=%.1f theory_step_ms=%.1f bubble=%.3f theory_bubble=%.3f peak_activations_first=%d "
                        "peak_activations_last=%d\n",
                        pipeline_schedule_name(schedule), p, m, vs, f, b, r.step_ms, theory_ms, r.bubble,
                        pipeline_bubble_fraction(shape), r.peak_first, r.peak_last);
            std::fflush(stdout);
        }
    return 0;
}

// Low-bit optimizer state, what it costs in accuracy and saves in memory, as a user trains: the
// samples' MLP classifier (samples/common/mlp.hpp) trained by ShardedOptimizer::train with Adam
// under ZeRO-2 on 2 in-process ranks, once per state precision (full, 8-bit, 4-bit), from the same
// initialization and sample order. Printed per problem and precision: the final training loss,
// its relative difference from full precision's (targets: 1% for 8-bit, 3% for 4-bit), accuracy
// (on the noisy labels: 0.8 is perfect), and rank 0's optimizer-state bytes against full precision's. Two problems, both with matrices
// above the 4096 elements low-bit state starts at: 64 -> 256 -> 10 (18.9K parameters) and
// 128 -> 512 -> 16 (74.3K).
//
//   bench_lowbit_accuracy [--epochs 12]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "mlp.hpp"
#include "shardopt/inprocess.hpp"
#include "shardopt/sharded_optimizer.hpp"
#include "shardopt/training.hpp"

using namespace shardopt;

namespace {

struct Outcome {
    double loss = 0.0, accuracy = 0.0;
    std::size_t state_bytes = 0;
};

Outcome run(const examples::MlpShape &shape, const examples::Dataset &data, StatePrecision precision, int epochs) {
    const std::vector<float> init = examples::mlp_init<float>(shape);
    Outcome out;
    std::mutex m;
    run_inprocess(2, [&](Communicator &comm) {
        ParameterSet layout(DType::f32);
        for (auto &[name, count] : examples::mlp_tensors(shape)) layout.add(name, count);
        OptimizerOptions adam = OptimizerOptions::defaults(OptimizerKind::adam);
        adam.lr = 2e-3;
        adam.state_precision = precision;
        ShardingOptions s;
        s.strategy = Strategy::zero2;
        auto opt = ShardedOptimizer::create(comm.shared_from_this(), layout, adam, s, init.data());
        TrainingOptions t;
        t.num_samples = std::int64_t(data.size());
        t.batch_size = 256;
        t.max_epochs = epochs;
        t.early_stopping = false;
        t.seed = 5;
        std::vector<float> scratch(init.size()); // the gradient of loss-only calls
        const TrainingResult r = opt->train(
            [&](const Batch &b) {
                float *grad = b.grad ? static_cast<float *>(b.grad) : scratch.data();
                return examples::mlp_loss_grad<float>(shape, data, static_cast<const float *>(b.params), grad,
                                                      b.samples, b.sample_count);
            },
            t);
        std::vector<float> last(init.size());
        opt->get_parameters(last.data());
        const std::size_t bytes = opt->memory_stats().optimizer_state_bytes;
        if (comm.rank() == 0) {
            std::lock_guard<std::mutex> lock(m);
            out.loss = r.training_loss_history.back();
            out.accuracy = examples::mlp_accuracy<float>(shape, data, last.data());
            out.state_bytes = bytes;
        }
    });
    return out;
}

} // namespace

int main(int argc, char **argv) {
    int epochs = 12;
    for (int i = 1; i < argc; ++i)
        if (std::strcmp(argv[i], "--epochs") == 0 && i + 1 < argc) epochs = std::atoi(argv[++i]);
    for (const examples::MlpShape &shape : {examples::MlpShape{64, 256, 10}, examples::MlpShape{128, 512, 16}}) {
        examples::Dataset data = examples::make_blobs(8192, shape.inputs, shape.classes);
        for (std::size_t i = 0; i < data.size(); ++i) // label noise: every fifth sample, in a scrambled order
            if ((i * 2654435761u) % 5 == 0) data.y[i] = (data.y[i] + 1 + int(i % std::size_t(shape.classes - 1))) % shape.classes;
        const Outcome full = run(shape, data, StatePrecision::full, epochs);
        for (StatePrecision p : {StatePrecision::full, StatePrecision::bits8, StatePrecision::bits4}) {
            const Outcome o = p == StatePrecision::full ? full : run(shape, data, p, epochs);
            const double diff = (o.loss - full.loss) / full.loss;
            const double target = p == StatePrecision::bits8 ? 0.01 : p == StatePrecision::bits4 ? 0.03 : 0.0;
            std::printf("name=lowbit_accuracy mlp=%dx%dx%d params=%zu precision=%s epochs=%d final_loss=%.6g "
                        "loss_vs_full=%+.4f%% accuracy=%.4f state_bytes_rank0=%zu state_vs_full=%.3f",
                        shape.inputs, shape.hidden, shape.classes, shape.parameter_count(), state_precision_name(p),
                        epochs, o.loss, 100.0 * diff, o.accuracy, o.state_bytes,
                        double(o.state_bytes) / double(full.state_bytes));
            if (p != StatePrecision::full)
                std::printf(" target=%.0f%% met=%s", 100.0 * target, std::fabs(diff) <= target ? "yes" : "no");
            std::printf("\n");
        }
    }
    return 0;
}

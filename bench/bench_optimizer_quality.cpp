// What an optimizer choice costs or buys in training quality, as a user trains: the samples' MLP
// classifier (samples/common/mlp.hpp) trained by ShardedOptimizer::train under ZeRO-2 on 2
// in-process ranks, from the same initialization and sample order, on 8192 blobs with a fifth of
// the labels flipped (deterministically) so the loss settles well above zero and a relative
// difference in it means something.
//
// 1. Low-bit state: Adam with full, 8-bit and 4-bit state. Printed: the final training loss, its
//    relative difference from full precision's (targets: 1% for 8-bit, 3% for 4-bit), accuracy
//    (on the noisy labels: 0.8 is perfect), and rank 0's optimizer-state bytes against full
//    precision's. Two MLPs with matrices above the 4096 elements low-bit state starts at:
//    64 -> 256 -> 10 (18.9K parameters) and 128 -> 512 -> 16 (74.3K), the larger twice: on 8192
//    samples, which it memorizes (flipped labels included: the hardest case for low-bit state), and
//    on 65536 (4 epochs), more samples than parameters, as models usually train.
// 2. Muon against AdamW at equal steps, the weights as matrices (ParameterSet::add_matrix; AdamW
//    on the biases inside Muon): each at its own usual rate (Muon 0.02, AdamW 2e-3), final loss.
//
//   bench_optimizer_quality [--epochs N]   (N for every problem; default 12, 12, 4)
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

Outcome run(const examples::MlpShape &shape, const examples::Dataset &data, const OptimizerOptions &optimizer,
            bool matrices, int epochs) {
    const std::vector<float> init = examples::mlp_init<float>(shape);
    Outcome out;
    std::mutex m;
    run_inprocess(2, [&](Communicator &comm) {
        ParameterSet layout(DType::f32);
        for (auto &[name, count] : examples::mlp_tensors(shape)) {
            const std::size_t rows = name == "fc1.weight" ? std::size_t(shape.hidden) : std::size_t(shape.classes);
            if (matrices && name.find("weight") != std::string::npos) layout.add_matrix(name, rows, count / rows);
            else layout.add(name, count);
        }
        ShardingOptions s;
        s.strategy = Strategy::zero2;
        auto opt = ShardedOptimizer::create(comm.shared_from_this(), layout, optimizer, s, init.data());
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

examples::Dataset noisy_blobs(const examples::MlpShape &shape, std::size_t samples) {
    examples::Dataset data = examples::make_blobs(samples, shape.inputs, shape.classes);
    for (std::size_t i = 0; i < data.size(); ++i) // label noise: every fifth sample, in a scrambled order
        if ((i * 2654435761u) % 5 == 0) data.y[i] = (data.y[i] + 1 + int(i % std::size_t(shape.classes - 1))) % shape.classes;
    return data;
}

OptimizerOptions adam_with(StatePrecision precision) {
    OptimizerOptions o = OptimizerOptions::defaults(OptimizerKind::adam);
    o.lr = 2e-3;
    o.state_precision = precision;
    return o;
}

} // namespace

// One problem: the MLP's shape, how many noisy blobs, for how many epochs; whether Muon is compared too.
struct Problem {
    examples::MlpShape shape;
    std::size_t samples;
    int epochs;
    bool muon;
    const char *regime;
};

int main(int argc, char **argv) {
    // 1-2: fewer samples than the larger MLP has parameters, which it memorizes (flipped labels
    // included); 3: eight times the samples, more than its parameters, as models usually train.
    std::vector<Problem> problems = {{{64, 256, 10}, 8192, 12, true, "generalizes"},
                                     {{128, 512, 16}, 8192, 12, true, "memorizes"},
                                     {{128, 512, 16}, 65536, 4, false, "generalizes"}};
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--epochs") == 0 && i + 1 < argc) {
            const int epochs = std::atoi(argv[++i]);
            for (Problem &p : problems) p.epochs = epochs;
        }
    }
    for (const Problem &problem : problems) {
        const examples::MlpShape &shape = problem.shape;
        const int epochs = problem.epochs;
        const examples::Dataset data = noisy_blobs(shape, problem.samples);
        const Outcome full = run(shape, data, adam_with(StatePrecision::full), false, epochs);
        for (StatePrecision p : {StatePrecision::full, StatePrecision::bits8, StatePrecision::bits4}) {
            const Outcome o = p == StatePrecision::full ? full : run(shape, data, adam_with(p), false, epochs);
            const double diff = (o.loss - full.loss) / full.loss;
            const double target = p == StatePrecision::bits8 ? 0.01 : p == StatePrecision::bits4 ? 0.03 : 0.0;
            std::printf("name=lowbit_accuracy mlp=%dx%dx%d params=%zu samples=%zu regime=%s precision=%s epochs=%d "
                        "final_loss=%.6g loss_vs_full=%+.4f%% accuracy=%.4f state_bytes_rank0=%zu state_vs_full=%.3f",
                        shape.inputs, shape.hidden, shape.classes, shape.parameter_count(), problem.samples,
                        problem.regime, state_precision_name(p), epochs, o.loss, 100.0 * diff, o.accuracy,
                        o.state_bytes, double(o.state_bytes) / double(full.state_bytes));
            if (p != StatePrecision::full)
                std::printf(" target=%.0f%% met=%s", 100.0 * target, std::fabs(diff) <= target ? "yes" : "no");
            std::printf("\n");
            std::fflush(stdout);
        }
        if (!problem.muon) continue;
        OptimizerOptions adamw = OptimizerOptions::defaults(OptimizerKind::adamw);
        adamw.lr = 2e-3;
        OptimizerOptions muon = OptimizerOptions::defaults(OptimizerKind::muon);
        muon.lr = 0.02;
        muon.adamw_lr = 2e-3;
        const Outcome a = run(shape, data, adamw, true, epochs), m = run(shape, data, muon, true, epochs);
        std::printf("name=muon_vs_adamw mlp=%dx%dx%d epochs=%d adamw_loss=%.6g muon_loss=%.6g muon_vs_adamw=%+.2f%% "
                    "adamw_accuracy=%.4f muon_accuracy=%.4f muon_lower=%s\n",
                    shape.inputs, shape.hidden, shape.classes, epochs, a.loss, m.loss, 100.0 * (m.loss - a.loss) / a.loss,
                    a.accuracy, m.accuracy, m.loss < a.loss ? "yes" : "no");
        std::fflush(stdout);
    }
    return 0;
}

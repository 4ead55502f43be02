// The demo MLP as a pipeline across separate processes on UCX: 2 stages x 2 data-parallel replicas
// (4 processes, tools/shardopt-run -n 4), each batch cut into micro-batches run under 1F1B, with
// DDP and then ZeRO-2 inside each stage's data group. Each process trains its stage (hybrid grid
// order: pipeline rank = rank / dp, data rank = rank % dp), computes the single-process f64
// reference of tests/equivalence/training.cpp itself, and checks its stage's final parameters
// against that reference's slice (max abs diff <= 1e-12); also that every batch applied one step
// with at most p - r activations held (1F1B), that both stages of a replica report the same loss,
// and that the replicas' first-batch losses average to the single-process one. What this adds to
// the in-process pipeline.equivalence: activations and gradients over UCX tagged send/recv between
// processes (the count message of the first batch, then fixed sizes), next to the data-parallel
// reductions of each stage's group on the same transport.
//
// One line per case: "PASS inner=zero2 rank=3 stage=1 replica=1 max_abs_diff=0"; exit 1 on a
// failed check, 2 on a wrong world size.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <vector>

#include "mlp_pipeline.hpp"
#include "shardopt/pipeline.hpp"
#include "shardopt/ucx.hpp"
#include "training.hpp"

using namespace shardopt;

namespace {

constexpr int kStages = 2, kReplicas = 2, kMicroBatches = 4, kSteps = 30;

// Trains one case on `world`; returns the number of failed checks on this rank.
int run_case(const CommunicatorPtr &world, Strategy inner) {
    testing::TrainingSetup setup;
    setup.steps = kSteps;
    setup.accumulation = kMicroBatches; // the reference averages the same micro-batches' gradients
    const auto data = examples::make_blobs(setup.samples, setup.shape.inputs, setup.shape.classes);
    const auto init = examples::mlp_init<double>(setup.shape);
    const int stage_rank = world->rank() / kReplicas, replica = world->rank() % kReplicas;

    ShardingOptions o;
    o.strategy = Strategy::hybrid;
    o.pipeline_parallel_size = kStages;
    o.data_parallel_size = kReplicas;
    o.hybrid_data_strategy = inner;
    examples::MlpPipelineStage stage(setup.shape, data, examples::mlp_chunk_bounds(kStages), kStages, stage_rank);
    const auto mine = stage.slice(init);
    auto opt = ShardedOptimizer::create(world, stage.layout(DType::f64), setup.optimizer, o, mine.data());
    PipelineOptions po;
    po.num_micro_batches = kMicroBatches;
    po.schedule = PipelineSchedule::one_f_one_b;
    PipelineRunner runner(*opt, stage, po);

    int failed = 0;
    std::vector<double> losses;
    for (int step = 0; step < kSteps; ++step) {
        stage.set_batch(0, std::int64_t(setup.samples), kMicroBatches, replica, kReplicas);
        const PipelineBatchResult r = runner.run_batch();
        if (!r.step.applied) {
            std::printf("FAIL inner=%s rank=%d: batch %d ended without an optimizer update\n", strategy_name(inner),
                        world->rank(), step);
            ++failed;
        }
        if (r.peak_activations > kStages - stage_rank) { // 1F1B: at most p - r forwards held
            std::printf("FAIL inner=%s rank=%d: %d activations held, 1F1B allows %d\n", strategy_name(inner),
                        world->rank(), r.peak_activations, kStages - stage_rank);
            ++failed;
        }
        losses.push_back(r.loss);
    }
    // The pipeline's loss: both stages of a replica report the same (the last stage's) each batch,
    // and the replicas' first-batch losses average to the single-process loss at the start.
    std::vector<double> all(losses.size() * std::size_t(world->size()));
    world->allgather(losses.data(), all.data(), losses.size(), DType::f64);
    auto loss_of = [&](int stage_rank_, int replica_, int step) {
        return all[std::size_t(stage_rank_ * kReplicas + replica_) * losses.size() + std::size_t(step)];
    };
    for (int step = 0; step < kSteps; ++step)
        if (loss_of(0, replica, step) != loss_of(1, replica, step)) {
            std::printf("FAIL inner=%s rank=%d: the stages of replica %d report losses %.17g and %.17g for batch %d\n",
                        strategy_name(inner), world->rank(), replica, loss_of(0, replica, step),
                        loss_of(1, replica, step), step);
            ++failed;
        }
    double first = 0.0;
    std::vector<double> scratch(init.size());
    const std::int64_t n = std::int64_t(setup.samples);
    for (int m = 0; m < kMicroBatches; ++m) {
        std::vector<std::int64_t> idx;
        for (std::int64_t i = n * m / kMicroBatches; i < n * (m + 1) / kMicroBatches; ++i) idx.push_back(i);
        first += examples::mlp_loss_grad<double>(setup.shape, data, init.data(), scratch.data(), idx.data(), idx.size());
    }
    first /= kMicroBatches;
    const double pipeline_first = (loss_of(0, 0, 0) + loss_of(0, 1, 0)) / kReplicas; // batch_slice's weights
    if (std::abs(pipeline_first - first) > 1e-12) {
        std::printf("FAIL inner=%s rank=%d: first batch loss %.17g averaged over the replicas, single-process %.17g\n",
                    strategy_name(inner), world->rank(), pipeline_first, first);
        ++failed;
    }

    std::vector<double> params(mine.size());
    opt->get_parameters(params.data());
    const auto want = stage.slice(testing::train_single_process<double>(setup));
    double diff = 0.0;
    for (std::size_t i = 0; i < params.size(); ++i) diff = std::max(diff, std::abs(params[i] - want[i]));
    const bool ok = diff <= 1e-12;
    std::printf("%s inner=%s rank=%d stage=%d replica=%d max_abs_diff=%.3g (last loss %.6f)\n", ok ? "PASS" : "FAIL",
                strategy_name(inner), world->rank(), stage_rank, replica, diff, losses.back());
    return failed + (ok ? 0 : 1);
}

} // namespace

int main() {
    try {
        CommunicatorPtr world = create_communicator_from_env("ucx");
        if (world->size() != kStages * kReplicas) {
            std::fprintf(stderr, "pipeline_ucx_main needs %d processes (shardopt-run -n %d), got %d\n",
                         kStages * kReplicas, kStages * kReplicas, world->size());
            return 2;
        }
        world->set_timeout(std::chrono::milliseconds(30000));
        int failed = 0;
        for (Strategy inner : {Strategy::ddp, Strategy::zero2}) failed += run_case(world, inner);
        return failed == 0 ? 0 : 1;
    } catch (const std::exception &e) {
        std::printf("FAIL: %s\n", e.what());
        return 1;
    }
}

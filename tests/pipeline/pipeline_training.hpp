// Training the demo MLP through a PipelineRunner on in-process ranks (pp x dp, tensor parallel 1),
// for the pipeline equivalence and checkpoint tests.
#pragma once

#include <functional>
#include <vector>

#include "mlp_pipeline.hpp"
#include "shardopt/pipeline.hpp"
#include "training.hpp"

namespace shardopt::testing {

struct PipelineSetup {
    int pp = 2, dp = 1;
    Strategy inner = Strategy::ddp; // inside each stage's data-parallel group
    PipelineOptions pipeline;
};

// A rank's optimizer and stage, before training (to load a checkpoint) or after (to save one).
using StageHook = std::function<void(ShardedOptimizer &, examples::MlpPipelineStage &)>;

// Trains setup.steps batches of the whole data set, each cut into num_micro_batches
// micro-batches (setup.accumulation is ignored), starting from mlp_init; returns the full
// packed parameters (assembled from the stages of data-parallel rank 0).
std::vector<double> train_pipeline(const TrainingSetup &setup, const PipelineSetup &pipe,
                                   const StageHook &before = nullptr, const StageHook &after = nullptr);

} // namespace shardopt::testing

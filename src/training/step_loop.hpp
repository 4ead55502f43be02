// The training loop of optimize() over the step protocol (every strategy but async_sgd, which
// runs each epoch as an asynchronous session of its own: src/async/async_optimize.cpp).
//
// Each epoch visits the samples in epoch_order; each global batch is split into contiguous
// per-rank slices (batch_slice), each rank's mean gradient weighted by its slice size so the
// average over the ranks is exactly the full batch's mean gradient, whatever the split. The model
// callback works on host memory: the parameters are read packed for each call, and its gradient
// is what the step takes. EpochProgress keeps the loss history, the best parameters and the
// early-stopping vote.
#pragma once

#include "shardopt/sharded_optimizer.hpp"
#include "trainee.hpp"

namespace shardopt::training {

// `options` checked already (check_optimize_options).
OptimizeResult step_loop(Trainee &trainee, const ModelFunction &model, const OptimizeOptions &options);

} // namespace shardopt::training

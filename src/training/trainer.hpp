// The training loop of train() (shardopt/training.hpp): epochs, the learning-rate schedule, the
// validation score, the best solution, early stopping and the final evaluation, written once over
// a Trainee. How an epoch's batches become optimizer steps is the trainee's: the step engine steps
// them one by one (synchronous_epoch.hpp), asynchronous SGD hands them to its workers.
#pragma once

#include <cstdint>

#include "shardopt/training.hpp"
#include "trainee.hpp"

namespace shardopt::training {

// The whole loop; collective over the target's world.
// `model` and `options` checked already (ShardedOptimizer::train).
TrainingResult train(Trainee &trainee, const BatchFunction &model, const TrainingOptions &options);

// Throws Error(invalid_state) for a loss that is not finite, naming where it was met.
void require_finite_loss(double loss, Dataset dataset, int epoch, std::int64_t step, const char *over);

} // namespace shardopt::training

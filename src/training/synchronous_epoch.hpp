// An epoch's batches as synchronous steps: each rank computes the gradient of its slice of the
// global batch, weighted so the average over the ranks is the whole batch's mean gradient, and
// every rank takes one step on it. The step engine's Trainee::run_epoch.
#pragma once

#include <functional>

#include "trainee.hpp"

namespace shardopt::training {

// `step` takes one optimizer step on this rank's packed gradient (plan.memory's grad(): host memory,
// or the optimizer's device memory when plan.memory is on the device).
EpochOutcome run_synchronous_epoch(const EpochPlan &plan, Trainee &trainee,
                                   const std::function<StepResult(const void *packed_grad)> &step);

} // namespace shardopt::training

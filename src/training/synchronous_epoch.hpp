// An epoch's batches as synchronous steps: each rank computes the gradient of its slice of the
// global batch, weighted so the average over the ranks is the whole batch's mean gradient, and
// every rank takes one step on it. The step engine's TrainingTarget::run_epoch.
#pragma once

#include "trainer.hpp"

namespace shardopt::training {

// What a synchronous epoch needs of the optimizer.
struct SynchronousSteps {
    const ParameterSet *layout;
    int data_rank, data_size;
    std::function<void(void *packed)> read_parameters;          // host, packed
    std::function<StepResult(const void *packed_grad)> step;    // one step on a host packed gradient
    std::function<double(double)> average_over_data;
};

EpochOutcome run_synchronous_epoch(const EpochPlan &plan, const SynchronousSteps &steps);

} // namespace shardopt::training

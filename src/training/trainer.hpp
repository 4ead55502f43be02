// The training loop of train() (shardopt/training.hpp): epochs, the learning-rate schedule, the
// validation score, the best solution, early stopping and the final evaluation, written once over
// a TrainingTarget. How an epoch's batches become optimizer steps is the target's: the step
// engine steps them one by one (synchronous_epoch.hpp), asynchronous SGD hands them to its workers.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "shardopt/params.hpp"
#include "shardopt/sharded_optimizer.hpp"
#include "shardopt/training.hpp"

namespace shardopt::training {

// One epoch's batches: batch k covers order[k * batch, min((k + 1) * batch, n)).
struct EpochPlan {
    int epoch = 0;                            // from 0, for messages and Batch::epoch
    const std::vector<std::int64_t> *order;   // the epoch's sample order
    std::int64_t batch = 0;                   // global batch size
    std::int64_t first_batch = 0;             // batches before it were done before a resume
    std::int64_t end_batch = 0;               // run batches [first_batch, end_batch)
    std::int64_t steps_before = 0;            // steps counted before batch 0 of this epoch
    std::function<void(std::int64_t step)> before_step; // per-step learning rate; may be empty
    const BatchFunction *model = nullptr;
    const std::function<void(const StepResult &)> *after_step = nullptr; // may be empty
};

struct EpochOutcome {
    double mean_loss = 0.0;   // over the samples of the batches run (the same on every rank)
    std::int64_t batches = 0; // run
};

// What the loop trains: an optimizer seen from its data-parallel group.
class TrainingTarget {
  public:
    virtual ~TrainingTarget() = default;
    virtual const ParameterSet &layout() const = 0;
    virtual int data_rank() const = 0;
    virtual int data_size() const = 0;
    // The packed parameters into host memory (collective where get_parameters is).
    virtual void read_parameters(void *packed) = 0;
    // The mean of `value` over the data-parallel group, the same on every member.
    virtual double average_over_data(double value) = 0;
    // True on every rank when any rank votes to stop (over the world).
    virtual bool agree_stop(bool vote) = 0;
    // An integer the same on every rank of the world, else Error(mismatch) naming a rank.
    virtual void agree(std::uint64_t value, const char *what) = 0;
    virtual double learning_rate() const = 0;
    virtual void set_learning_rate(double lr) = 0;
    virtual EpochOutcome run_epoch(const EpochPlan &plan) = 0;
};

// The whole loop; collective over the target's world.
TrainingResult train(TrainingTarget &target, const BatchFunction &model, const TrainingOptions &options);

// Throws Error(invalid_state) for a loss that is not finite, naming where it was met.
void require_finite_loss(double loss, Dataset dataset, int epoch, std::int64_t step, const char *over);

} // namespace shardopt::training

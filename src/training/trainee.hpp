// Trainee: what the training loop (trainer.hpp) needs of an optimizer. Every optimizer behind
// ShardedOptimizer is one (src/sharding/optimizer_backend.hpp): the loop reads the parameters,
// sets the learning rate, averages over the data-parallel ranks, asks them whether to stop, and
// has the optimizer run an epoch's batches, each its own way (the step engine steps them one by
// one: synchronous_epoch.hpp; asynchronous SGD hands them to its workers).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "shardopt/comm.hpp"
#include "shardopt/params.hpp"
#include "shardopt/sharded_optimizer.hpp"
#include "shardopt/training.hpp"
#include "batch_memory.hpp"

namespace shardopt::training {

// One epoch's batches: batch k covers order[k * batch, min((k + 1) * batch, n)).
struct EpochPlan {
    int epoch = 0;                                      // for messages and Batch::epoch
    bool starts_call = false;                           // the first epoch of a train() call
    const std::vector<std::int64_t> *order = nullptr;   // the epoch's sample order
    std::int64_t batch = 0;                             // global batch size
    std::int64_t first_batch = 0;                       // the batches before were done before a resume
    std::int64_t end_batch = 0;                         // run batches [first_batch, end_batch)
    std::int64_t steps_before = 0;                      // steps counted before batch 0 of this epoch
    std::function<void(std::int64_t step)> before_step; // per-step learning rate; may be empty
    const BatchFunction *model = nullptr;
    BatchMemory *memory = nullptr;                      // where the model's batches live
    const std::function<void(const StepResult &)> *after_step = nullptr; // may be empty
};

struct EpochOutcome {
    double mean_loss = 0.0;   // over the samples of the batches run (the same on every rank)
    std::int64_t batches = 0; // run
};

class Trainee {
  public:
    virtual ~Trainee() = default;

    virtual const ParameterSet &layout() const noexcept = 0;
    // The data-parallel group: its ranks split each batch between them.
    virtual CommunicatorPtr data_group() const noexcept = 0;
    // Packed host copy of every parameter (collective where the optimizer's parameters are
    // sharded).
    virtual void get_parameters(void *packed) = 0;
    // `value` of this rank reduced over the data group (every rank gets the result).
    virtual double allreduce_over_data(double value, ReduceOp op) = 0;
    // True on every rank when any rank votes to stop (collective over the world).
    virtual bool should_early_stop(bool local_vote) = 0;
    virtual double learning_rate() const noexcept = 0;
    virtual void set_learning_rate(double lr) = 0; // checked already
    // Runs the plan's batches; collective over the world.
    virtual EpochOutcome run_epoch(const EpochPlan &plan) = 0;
    // Where the model's batches live: host memory, or (on_device, TrainingOptions::device_batches)
    // the optimizer's device memory. This default is host memory and refuses on_device with
    // Error(invalid_argument); an optimizer in device memory overrides it.
    virtual std::unique_ptr<BatchMemory> batch_memory(bool on_device);
};

} // namespace shardopt::training

// The AiDotNet-style training loop (ShardedOptimizer::optimize) over any engine that can run the
// step protocol with host gradients: ShardedOptimizer and ShardedDeviceOptimizer share it.
#pragma once

#include "shardopt/sharded_optimizer.hpp"

namespace shardopt {

// What the loop needs from an optimizer.
class OptimizeTarget {
  public:
    virtual ~OptimizeTarget() = default;
    virtual const ParameterSet &layout() const = 0;
    // This rank's place in the data-parallel group (samples are split across it).
    virtual int data_rank() const = 0;
    virtual int data_size() const = 0;
    // Packed host copy of every parameter (collective where the engine's is).
    virtual void get_parameters(void *packed) = 0;
    // One step: packed host gradient (this rank's, already weighted) handed over bucket by
    // bucket, then the update.
    virtual void step_with(const unsigned char *packed_grad) = 0;
    // Mean of `value` over the data-parallel group.
    virtual double average_over_data(double value) = 0;
    virtual bool should_early_stop(bool local_vote) = 0;
};

// Validates the options (Error(invalid_argument)) and runs the loop.
OptimizeResult run_optimize_loop(OptimizeTarget &target, const ModelFunction &model, const OptimizeOptions &options);

} // namespace shardopt

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

// One step of `opt` (ShardedOptimizer or the device engine) on a packed host gradient: every
// bucket's part handed over with copy(bucket_grad, source, bytes), in bucket order, then step().
template <class Opt, class Copy> void step_on_packed_gradient(Opt &opt, const unsigned char *packed_grad, Copy copy) {
    const ParameterSet &layout = opt.layout();
    const std::size_t elem = layout.element_size();
    opt.zero_grad();
    std::size_t packed = 0;
    for (int b = 0; b < layout.bucket_count(); ++b) {
        const std::size_t count = layout.bucket(b).count;
        copy(opt.bucket_grad(b), packed_grad + packed * elem, count * elem);
        packed += count;
        opt.grad_ready(b);
    }
    opt.step();
}

// Validates the options (Error(invalid_argument)) and runs the loop.
OptimizeResult run_optimize_loop(OptimizeTarget &target, const ModelFunction &model, const OptimizeOptions &options);

} // namespace shardopt

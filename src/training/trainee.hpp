// Trainee: what the training loop (step_loop.hpp) needs of an optimizer. Every optimizer behind
// ShardedOptimizer is one (src/sharding/optimizer_backend.hpp): the loop reads the parameters,
// steps on the gradient of each batch, averages the batch loss over the data-parallel ranks and
// asks them whether to stop, and nothing else.
#pragma once

#include "shardopt/comm.hpp"
#include "shardopt/params.hpp"
#include "shardopt/sharded_optimizer.hpp"

namespace shardopt::training {

class Trainee {
  public:
    virtual ~Trainee() = default;

    virtual const ParameterSet &layout() const noexcept = 0;
    // The data-parallel group: its ranks split each batch between them.
    virtual CommunicatorPtr data_group() const noexcept = 0;
    // Packed host copy of every parameter (collective where the optimizer's parameters are
    // sharded).
    virtual void get_parameters(void *packed) = 0;
    // One step of the protocol on `packed_grad`, this rank's gradient as a packed host buffer.
    virtual StepResult step_on_packed_gradient(const void *packed_grad) = 0;
    // `value` of this rank reduced over the data group (every rank gets the result).
    virtual double allreduce_over_data(double value, ReduceOp op) = 0;
    // True on every rank when any rank votes to stop (collective over the world).
    virtual bool should_early_stop(bool local_vote) = 0;
};

} // namespace shardopt::training

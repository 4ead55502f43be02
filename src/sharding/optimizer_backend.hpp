// OptimizerBackend: the optimizer behind a ShardedOptimizer, as c10d's Backend is behind a
// ProcessGroup. ShardedOptimizer holds one and forwards every call to it; it runs the checks
// common to every backend (arguments, options) once, before it forwards, so a backend checks only
// what is its own. Two implement it:
//   engine::StepEngine (engine/step_engine.hpp)  every strategy but async_sgd, over a memory Space;
//   AsyncSgdBackend (src/async/async_sgd_backend.cpp)  async_sgd, which trains through train()
//                                                   only and refuses the step protocol.
// The methods mean what ShardedOptimizer's of the same name mean (shardopt/sharded_optimizer.hpp).
// A backend is also what the training loop trains (training::Trainee: the parameters, the learning
// rate, reductions over the data group, the early-stop vote, and an epoch's batches run its way).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../training/trainee.hpp"
#include "shardopt/async_checkpoint.hpp"
#include "shardopt/sharded_optimizer.hpp"

namespace shardopt {

class OptimizerBackend : public training::Trainee {
  public:
    ~OptimizerBackend() override = default;

    virtual Communicator &communicator() noexcept = 0;
    virtual const ShardingOptions &options() const noexcept = 0;
    virtual const OptimizerOptions &optimizer_options() const noexcept = 0;
    // The rate of later steps (set_learning_rate, `lr` checked already, is the Trainee's).
    double learning_rate() const noexcept override { return optimizer_options().lr; }
    virtual std::int64_t step_count() const noexcept = 0;
    virtual ShardedOptimizer::GridPosition grid_position() const noexcept = 0;
    virtual CommunicatorPtr tensor_group() const noexcept = 0;
    virtual CommunicatorPtr pipeline_group() const noexcept = 0;

    // --- parameters (get_parameters and layout are the Trainee's) ---
    virtual void *parameters() = 0;
    virtual void *tensor_parameters(int t) = 0;
    virtual void set_parameters(const void *packed) = 0; // not null
    virtual void *gather(int bucket) = 0;
    virtual void release(int bucket) = 0;

    // --- step protocol ---
    virtual void zero_grad() = 0;
    virtual void *bucket_grad(int bucket) = 0;
    virtual void *grad(int tensor) = 0;
    virtual void grad_ready(int bucket) = 0;
    virtual StepResult step() = 0;

    // --- state ---
    virtual void synchronize_optimizer_state() = 0;
    virtual MemoryStats memory_stats() const = 0;
    virtual std::uint64_t bytes_sent() const = 0;

    // --- checkpoints ---
    virtual void save(const std::string &dir, CheckpointForm form) = 0;
    virtual std::unique_ptr<AsyncCheckpoint> save_async(const std::string &dir) = 0;
    virtual void load(const std::string &dir) = 0;
    virtual std::vector<unsigned char> serialize() = 0;
    virtual void serialize(const ShardedOptimizer::ByteWriter &write) = 0;
    virtual void deserialize(const void *data, std::size_t size) = 0;

    // The asynchronous optimizer this backend is (its statistics), or null.
    virtual AsyncSgdOptimizer *async_sgd() noexcept { return nullptr; }
};

// The async_sgd backend: AsyncSgdOptimizer::create's optimizer (collective over comm; see
// shardopt/async_sgd.hpp). Defined in src/async (async_sgd_backend.cpp), the layer above this one:
// ShardedOptimizer::create names it here, the one call from this folder into src/async.
std::unique_ptr<OptimizerBackend> make_async_sgd_backend(CommunicatorPtr comm, ParameterSet layout,
                                                          const OptimizerOptions &optimizer,
                                                          const ShardingOptions &options, const void *initial);

} // namespace shardopt

// StepEngine: the one engine behind ShardedOptimizer, for every strategy but async_sgd and every
// memory space (an OptimizerBackend).
//
// It runs the step protocol of sharded_optimizer.hpp over a StrategyPlan (../strategies/): which
// buffers exist (full or shard), which collective reduces each bucket, what is gathered when.
// Every buffer and element-wise pass belongs to a Space (host memory or a GPU), which also orders
// collectives after its compute stream. Its parts, one concept each:
//   GradientBuckets  (gradient_buckets.hpp)  buckets opened, accumulated, marked ready, reduced;
//   Reduction        (reduction.hpp)         the collectives, or gradient compression in their place;
//   ParameterStore   (parameter_store.hpp)   the parameters at rest, FSDP units, allgathers after;
//   Update           (update.hpp)            the update where the memory is, or offloaded to the
//                                            CPU (ZeRO-Offload), as the memory plan chooses;
//   engine_state.cpp                         checkpoints and state synchronization.
// The training loop is src/training/trainer.cpp, over the engine as a training::Trainee whose
// epochs are synchronous steps (src/training/synchronous_epoch.cpp).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "../hybrid_grid.hpp"
#include "../memory_plan.hpp"
#include "../offload/offload_plan.hpp"
#include "../optimizer_backend.hpp"
#include "../strategies/strategy_plan.hpp"
#include "engine_context.hpp"
#include "gradient_buckets.hpp"
#include "host_comms.hpp"
#include "parameter_store.hpp"
#include "reduction.hpp"
#include "space.hpp"
#include "update.hpp"

namespace shardopt::engine {

class StepEngine final : public OptimizerBackend {
  public:
    // Collective over comm (builds the hybrid grid). `initial`: host, packed, null for zeros.
    // `external_params`: the caller's parameter buffer (memory of the space, padded_count
    // elements), or null for the engine's own.
    StepEngine(std::unique_ptr<Space> space, CommunicatorPtr comm, ParameterSet layout,
               const OptimizerOptions &optimizer, const ShardingOptions &options, const void *initial,
               void *external_params = nullptr);
    ~StepEngine() override;
    StepEngine(const StepEngine &) = delete;
    StepEngine &operator=(const StepEngine &) = delete;

    Communicator &communicator() noexcept override { return *comm_; }
    const OptimizerOptions &optimizer_options() const noexcept override { return optimizer_; }
    const ParameterSet &layout() const noexcept override { return layout_; }
    const ShardingOptions &options() const noexcept override { return options_; }
    std::int64_t step_count() const noexcept override { return step_count_; }
    void set_learning_rate(double lr) override;
    ShardedOptimizer::GridPosition grid_position() const noexcept override;
    CommunicatorPtr data_group() const noexcept override { return grid_.data; }
    CommunicatorPtr tensor_group() const noexcept override { return grid_.tensor; }
    CommunicatorPtr pipeline_group() const noexcept override { return grid_.pipeline; }

    void *parameters() override { return params_->parameters(); }
    void *tensor_parameters(int t) override { return params_->tensor_parameters(t); }
    void *gather(int b) override;
    void release(int b) override { params_->release(b); }
    void get_parameters(void *packed_host) override { params_->get(packed_host); }
    void set_parameters(const void *packed_host) override;

    void zero_grad() override { grads_->zero_grad(); }
    void *bucket_grad(int b) override { return grads_->bucket_grad(b); }
    void *grad(int t) override { return grads_->grad(t); }
    void grad_ready(int b) override { grads_->grad_ready(b); }
    StepResult step() override;
    // Every bucket's gradient from a packed buffer (host memory, or in_space the space's), then
    // step().
    StepResult step_on_packed_gradient(const void *packed_grad, bool in_space = false);
    double allreduce_over_data(double value, ReduceOp op) override;
    // An epoch of the training loop: its batches as synchronous steps on packed gradients.
    training::EpochOutcome run_epoch(const training::EpochPlan &plan) override;
    // Host memory, or on_device (a device space only) packed buffers of the space.
    std::unique_ptr<training::BatchMemory> batch_memory(bool on_device) override;

    MemoryStats memory_stats() const override;
    // Bytes moved so far over every communicator the engine uses (Communicator::bytes_sent).
    std::uint64_t bytes_sent() const override;

    // --- checkpoints and state (engine_state.cpp) ---
    void save(const std::string &dir, CheckpointForm form) override;
    std::unique_ptr<AsyncCheckpoint> save_async(const std::string &dir) override;
    void load(const std::string &dir) override;
    std::vector<unsigned char> serialize() override;
    void serialize(const ShardedOptimizer::ByteWriter &write) override;
    void deserialize(const void *data, std::size_t size) override;
    void synchronize_optimizer_state() override;
    bool should_early_stop(bool local_vote) override;

  private:
    class CheckpointView; // the engine as a checkpoint::CheckpointTarget (engine_state.cpp)

    // What this rank will hold (../memory_plan.hpp), for the up-front fit check.
    MemoryPlan memory_plan(int state_slots, bool external_params) const;
    // `initial` (host, packed) as the parameters: rank 0's of the data group unless
    // ShardingOptions::broadcast_initial is off.
    void set_initial_parameters(const void *initial);
    // Replaces the parameters at rest with `host` (laid out as the resident buffer), keeping the
    // update's copies of them (ZeRO-Offload's master weights) equal to them.
    void write_params(const unsigned char *host);
    // Whether every rank's gradient is finite (LocalSGD: each rank's own norm, so they vote).
    bool all_finite(double sum_of_squares);
    // bytes_sent() since the last call (StepResult::bytes_sent).
    std::uint64_t take_traffic();
    void note_buffers();

    std::unique_ptr<Space> space_;
    CommunicatorPtr comm_;
    ParameterSet layout_;
    OptimizerOptions optimizer_;
    ShardingOptions options_;
    HybridGrid grid_;
    StrategyPlan plan_;
    OffloadPlan offload_;
    std::vector<OwnedSegment> chunks_;
    HostComms host_comms_;
    const EngineContext ctx_;
    std::int64_t step_count_ = 0;

    std::unique_ptr<Reduction> reduction_;
    std::unique_ptr<ParameterStore> params_;
    std::unique_ptr<GradientBuckets> grads_;
    std::unique_ptr<Update> update_;
    std::size_t peak_buffer_bytes_ = 0;
    std::uint64_t traffic_at_last_step_ = 0;
};

} // namespace shardopt::engine

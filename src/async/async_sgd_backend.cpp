// AsyncSgdBackend: asynchronous SGD as ShardedOptimizer's backend (strategy async_sgd). It trains
// through optimize() only: the step protocol is refused, naming why; gather, release and
// tensor_parameters give the rank's view of the parameters (no units to gather), and the grid is
// the flat one. ShardedOptimizer checked the arguments it shares with the step engine, so this
// calls the optimizer's state directly where AsyncSgdOptimizer's public methods would check again.
#include <memory>
#include <string>

#include "../sharding/optimizer_backend.hpp"
#include "async_state.hpp"
#include "shardopt/async_sgd.hpp"
#include "shardopt/error.hpp"

namespace shardopt {

class AsyncSgdBackend final : public OptimizerBackend {
  public:
    explicit AsyncSgdBackend(std::unique_ptr<AsyncSgdOptimizer> optimizer)
        : optimizer_(std::move(optimizer)), s_(*optimizer_->state_) {}

    const ParameterSet &layout() const noexcept override { return s_.layout; }
    CommunicatorPtr data_group() const noexcept override { return s_.world; }
    void get_parameters(void *packed) override { s_.view_to_packed(packed); }
    double allreduce_over_data(double value, ReduceOp op) override { return s_.allreduce_over_world(value, op); }
    bool should_early_stop(bool local_vote) override { return s_.early_stop_vote(local_vote); }

    Communicator &communicator() noexcept override { return *s_.world; }
    const ShardingOptions &options() const noexcept override { return s_.sharding; }
    const OptimizerOptions &optimizer_options() const noexcept override { return s_.optimizer; }
    void set_learning_rate(double lr) override { s_.set_lr(lr); }
    std::int64_t step_count() const noexcept override { return s_.step_count; }
    ShardedOptimizer::GridPosition grid_position() const noexcept override {
        return ShardedOptimizer::GridPosition{0, 0, s_.rank(), 1, 1, s_.size()};
    }
    CommunicatorPtr tensor_group() const noexcept override { return nullptr; }
    CommunicatorPtr pipeline_group() const noexcept override { return nullptr; }

    void *parameters() override { return s_.view.data(); }
    void *tensor_parameters(int t) override { return s_.view.data() + s_.layout.tensor(t).offset * s_.elem(); }
    void set_parameters(const void *packed) override { s_.set_from_packed(packed); }
    void *gather(int bucket) override { return s_.view.data() + s_.layout.bucket(bucket).offset * s_.elem(); }
    void release(int bucket) override { s_.layout.bucket(bucket); } // range check

    void zero_grad() override { no_step_protocol("zero_grad"); }
    void *bucket_grad(int) override { no_step_protocol("bucket_grad"); }
    void *grad(int) override { no_step_protocol("grad"); }
    void grad_ready(int) override { no_step_protocol("grad_ready"); }
    StepResult step() override { no_step_protocol("step"); }

    void synchronize_optimizer_state() override { optimizer_->synchronize_optimizer_state(); }
    MemoryStats memory_stats() const override { return optimizer_->memory_stats(); }
    std::uint64_t bytes_sent() const override { return optimizer_->bytes_sent(); }
    training::EpochOutcome run_epoch(const training::EpochPlan &plan) override { return s_.run_epoch(plan); }

    void save(const std::string &dir, CheckpointForm form) override { optimizer_->save(dir, form); }
    std::unique_ptr<AsyncCheckpoint> save_async(const std::string &) override {
        throw Error(ErrorCode::unsupported, "save_async: asynchronous SGD checkpoints with save() (its owners hold "
                                            "state that a step-boundary snapshot would miss)");
    }
    void load(const std::string &dir) override { optimizer_->load(dir); }
    std::vector<unsigned char> serialize() override { return optimizer_->serialize(); }
    void serialize(const ShardedOptimizer::ByteWriter &write) override { optimizer_->serialize(write); }
    void deserialize(const void *data, std::size_t size) override { optimizer_->deserialize(data, size); }

    AsyncSgdOptimizer *async_sgd() noexcept override { return optimizer_.get(); }

  private:
    [[noreturn]] static void no_step_protocol(const char *call) {
        throw Error(ErrorCode::unsupported,
                    std::string(call) + ": the async_sgd strategy trains through train() or optimize() (its workers and parameter "
                                        "servers run their own clock), not the step protocol");
    }

    std::unique_ptr<AsyncSgdOptimizer> optimizer_;
    AsyncSgdOptimizer::State &s_;
};

std::unique_ptr<OptimizerBackend> make_async_sgd_backend(CommunicatorPtr comm, ParameterSet layout,
                                                          const OptimizerOptions &optimizer,
                                                          const ShardingOptions &options, const void *initial) {
    return std::make_unique<AsyncSgdBackend>(AsyncSgdOptimizer::create(std::move(comm), std::move(layout), optimizer,
                                                                       options.async_staleness, options, initial));
}

} // namespace shardopt

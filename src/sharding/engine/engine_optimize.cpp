// The step engine as a training::TrainingTarget: train() (src/training) runs the epochs; an epoch's
// batches are synchronous steps, the model's host gradient copied into the buckets.
#include <cstdint>

#include "../../training/synchronous_epoch.hpp"
#include "../../training/trainer.hpp"
#include "shardopt/error.hpp"
#include "step_engine.hpp"

namespace shardopt::engine {

StepResult StepEngine::step_on_packed_gradient(const unsigned char *packed_grad) {
    zero_grad();
    std::size_t packed = 0;
    for (int b = 0; b < layout_.bucket_count(); ++b) {
        const std::size_t count = layout_.bucket(b).count;
        // The copy follows bucket_grad's clearing (on the compute stream for a device space).
        space_->copy_from_host(bucket_grad(b), packed_grad + packed * elem_, count * elem_);
        packed += count;
        grad_ready(b);
    }
    return step();
}

namespace {

// Both 32-bit halves of v, min and max over the world: equal everywhere, or a mismatch.
void agree_over(Space &space, Communicator &world, std::uint64_t v, const char *what) {
    const double hi = double(v >> 32), lo = double(v & 0xffffffffu);
    const bool same = space.allreduce_scalar(world, hi, ReduceOp::max) == -space.allreduce_scalar(world, -hi, ReduceOp::max) &&
                      space.allreduce_scalar(world, lo, ReduceOp::max) == -space.allreduce_scalar(world, -lo, ReduceOp::max);
    require(same, ErrorCode::mismatch,
            std::string(what) + " differ across ranks (every rank must train with the same options)");
}

} // namespace

class StepEngine::Training final : public training::TrainingTarget {
  public:
    explicit Training(StepEngine &e) : e_(e) {
        steps_.layout = &e.layout_;
        steps_.data_rank = e.grid_.data->rank();
        steps_.data_size = e.grid_.data->size();
        steps_.read_parameters = [this](void *packed) { e_.get_parameters(packed); };
        steps_.step = [this](const void *g) { return e_.step_on_packed_gradient(static_cast<const unsigned char *>(g)); };
        steps_.average_over_data = [this](double v) { return average_over_data(v); };
    }
    const ParameterSet &layout() const override { return e_.layout_; }
    int data_rank() const override { return steps_.data_rank; }
    int data_size() const override { return steps_.data_size; }
    void read_parameters(void *packed) override { e_.get_parameters(packed); }
    double average_over_data(double value) override {
        return e_.space_->allreduce_scalar(*e_.grid_.data, value, ReduceOp::avg);
    }
    bool agree_stop(bool vote) override { return e_.should_early_stop(vote); }
    void agree(std::uint64_t value, const char *what) override { agree_over(*e_.space_, *e_.grid_.world, value, what); }
    double learning_rate() const override { return e_.optimizer_.lr; }
    void set_learning_rate(double lr) override { e_.set_lr(lr); }
    training::EpochOutcome run_epoch(const training::EpochPlan &plan) override {
        return training::run_synchronous_epoch(plan, steps_);
    }

  private:
    StepEngine &e_;
    training::SynchronousSteps steps_;
};

TrainingResult StepEngine::train(const BatchFunction &model, const TrainingOptions &options) {
    Training target(*this);
    return training::train(target, model, options);
}

} // namespace shardopt::engine

// Asynchronous SGD's epochs for train() (src/training runs the epochs, the schedule, the
// validation and early stopping as for every strategy): each epoch is one asynchronous session,
// this rank's worker running its steps as the clock keeper hands it versions, its step labelled t
// on its slice of the epoch's batch first_batch + t.
#include <algorithm>
#include <chrono>
#include <cstring>

#include "../optim/vector_ops.hpp"
#include "../elapsed.hpp"
#include "../training/trainer.hpp"
#include "async_state.hpp"
#include "session.hpp"
#include "shardopt/batch_split.hpp"
#include "shardopt/error.hpp"

namespace shardopt {
namespace {

using Clock = std::chrono::steady_clock;
// The packed gradient into the full padded buffer (padding left 0).
void scatter_packed(const ParameterSet &layout, const unsigned char *packed, unsigned char *padded) {
    const std::size_t elem = layout.element_size();
    std::size_t in = 0;
    for (const auto &b : layout.buckets()) {
        std::memcpy(padded + b.offset * elem, packed + in * elem, b.count * elem);
        in += b.count;
    }
}

// The optimizer's state as the training loop's Trainee, for AsyncSgdOptimizer's own train() (as a
// ShardedOptimizer's backend, AsyncSgdBackend is the Trainee).
class StateTrainee final : public training::Trainee {
  public:
    explicit StateTrainee(AsyncSgdOptimizer::State &s) : s_(s) {}
    const ParameterSet &layout() const noexcept override { return s_.layout; }
    CommunicatorPtr data_group() const noexcept override { return s_.world; }
    void get_parameters(void *packed) override { s_.view_to_packed(packed); }
    double allreduce_over_data(double value, ReduceOp op) override { return s_.allreduce_over_world(value, op); }
    bool should_early_stop(bool local_vote) override { return s_.early_stop_vote(local_vote); }
    double learning_rate() const noexcept override { return s_.optimizer.lr; }
    void set_learning_rate(double lr) override { s_.set_lr(lr); }
    training::EpochOutcome run_epoch(const training::EpochPlan &plan) override { return s_.run_epoch(plan); }

  private:
    AsyncSgdOptimizer::State &s_;
};

} // namespace

TrainingResult AsyncSgdOptimizer::train(const BatchFunction &model, const TrainingOptions &options) {
    require(bool(model), ErrorCode::invalid_argument, "train: the model is null");
    options.validate();
    StateTrainee trainee(*state_);
    return training::train(trainee, model, options);
}

double AsyncSgdOptimizer::State::allreduce_over_world(double value, ReduceOp op) {
    double out = 0.0;
    world->allreduce(&value, &out, 1, DType::f64, op);
    return out;
}

training::EpochOutcome AsyncSgdOptimizer::State::run_epoch(const training::EpochPlan &plan) {
    State &s = *this;
    if (plan.starts_call) s.stats = AsyncSgdStats{}; // what this train() call sees
    const int ranks = s.size(), rank = s.rank();
    const std::int64_t n = std::int64_t(plan.order->size()), batch = plan.batch;
    const std::size_t elem = layout.element_size(), count = layout.element_count();
    std::vector<unsigned char> params(count * elem), grads(count * elem);
    std::vector<std::int64_t> samples;
    const auto started = Clock::now();

    // The epoch's clocks: one per batch run.
    std::vector<std::int64_t> clock_samples;
    for (std::int64_t k = plan.first_batch; k < plan.end_batch; ++k)
        clock_samples.push_back(std::min(batch, n - k * batch));
    const std::int64_t first_step = plan.steps_before + plan.first_batch;
    std::function<void(std::int64_t)> before_update;
    if (plan.before_step) before_update = [&plan, first_step](std::int64_t c) { plan.before_step(first_step + c); };

    async::Session session(s, clock_samples, plan.epoch, first_step, before_update);
    async::Session::Handed handed; // the version this rank's worker computes on
    std::int64_t applied = 0;
    try {
        for (;;) {
            const std::int64_t start = (plan.first_batch + handed.label) * batch;
            const std::int64_t batch_n = std::min(batch, n - start);
            const BatchSlice slice = batch_slice(start, batch_n, rank, ranks);
            samples.resize(std::size_t(slice.size()));
            for (std::int64_t i = slice.begin; i < slice.end; ++i)
                samples[std::size_t(i - slice.begin)] = (*plan.order)[std::size_t(i)];
            s.view_to_packed(params.data());
            std::memset(grads.data(), 0, grads.size());
            auto t0 = Clock::now();
            double loss = 0.0;
            if (!samples.empty()) {
                Batch b;
                b.params = params.data();
                b.grad = grads.data();
                b.samples = samples.data();
                b.sample_count = samples.size();
                b.epoch = plan.epoch;
                b.step = first_step + handed.label;
                loss = (*plan.model)(b);
            }
            s.stats.model_seconds += seconds_since(t0);
            if (slice.weight != 1.0) scale(grads.data(), count, layout.dtype(), slice.weight);
            loss *= slice.weight;
            scatter_packed(layout, grads.data(), s.gradient.data());
            session.push(handed.label, handed.version, loss, s.gradient.data());
            ++s.stats.steps;
            t0 = Clock::now();
            const async::Session::Handed next = session.receive();
            s.stats.wait_seconds += seconds_since(t0);
            if (next.label >= session.clocks()) {
                handed = next;
                break;
            }
            s.stats.max_own_lead = std::max(s.stats.max_own_lead, int(next.label - next.version));
            handed = next;
        }
        applied = session.finish();
    } catch (...) {
        session.fail(); // rethrows this rank's first failure of the session
    }
    require(applied == session.clocks(), ErrorCode::internal,
            "async SGD: the session applied " + std::to_string(applied) + " of " + std::to_string(session.clocks()) +
                " updates");
    s.step_count += applied;
    const async::ReplyHeader &account = handed.account;
    s.stats.updates += applied;
    s.stats.late_gradients += account.late_gradients;
    s.stats.skipped_clocks += account.skipped_clocks;
    s.stats.max_staleness = std::max(s.stats.max_staleness, int(account.max_staleness));
    s.stats.max_lead = std::max(s.stats.max_lead, int(account.max_lead));
    s.stats.seconds += seconds_since(started);

    training::EpochOutcome out;
    out.batches = applied;
    out.mean_loss = account.epoch_loss; // the keeper's: the mean over the epoch's samples
    return out;
}

} // namespace shardopt

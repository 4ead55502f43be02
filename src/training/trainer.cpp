#include "trainer.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "epoch_order.hpp"
#include "shardopt/batch_split.hpp"
#include "shardopt/error.hpp"

namespace shardopt::training {
namespace {

// The best epoch (the first with the lowest score) and the patience count of early stopping.
class ScoreKeeper {
  public:
    explicit ScoreKeeper(double tolerance) : tolerance_(tolerance) {}

    // Returns true when `score` is a new best (its parameters are to be kept).
    bool record(int epoch, double score) {
        if (score < progress_mark_ - tolerance_) {
            progress_mark_ = score;
            epochs_without_progress_ = 0;
        } else {
            ++epochs_without_progress_;
        }
        if (!(score < best_score_)) return false;
        best_score_ = score;
        best_epoch_ = epoch;
        return true;
    }
    int epochs_without_progress() const { return epochs_without_progress_; }
    double best_score() const { return best_score_; }
    int best_epoch() const { return best_epoch_; }

  private:
    double tolerance_;
    double best_score_ = std::numeric_limits<double>::infinity();
    double progress_mark_ = std::numeric_limits<double>::infinity();
    int best_epoch_ = -1;
    int epochs_without_progress_ = 0;
};

// A hash of what every rank must agree on before training (the options, not the callbacks).
std::uint64_t options_fingerprint(const TrainingOptions &o) {
    std::uint64_t h = 1469598103934665603ull;
    auto mix = [&h](std::uint64_t v) {
        for (int i = 0; i < 8; ++i) {
            h ^= (v >> (8 * i)) & 0xff;
            h *= 1099511628211ull;
        }
    };
    auto bits = [](double d) {
        std::uint64_t u;
        std::memcpy(&u, &d, sizeof u);
        return u;
    };
    const LearningRateSchedule &s = o.schedule;
    for (std::uint64_t v :
         {std::uint64_t(o.num_samples), std::uint64_t(o.num_validation_samples), std::uint64_t(o.num_test_samples),
          std::uint64_t(o.batch_size), std::uint64_t(o.max_epochs), std::uint64_t(o.max_steps), std::uint64_t(o.shuffle),
          o.seed, std::uint64_t(o.early_stopping), std::uint64_t(o.patience), bits(o.tolerance), std::uint64_t(s.kind),
          std::uint64_t(s.per_step), std::uint64_t(s.warmup), std::uint64_t(s.decay_period), bits(s.min_lr),
          bits(s.gamma), std::uint64_t(o.evaluate_best), std::uint64_t(o.device_batches), std::uint64_t(o.first_epoch), std::uint64_t(o.start_step)})
        mix(v);
    return h;
}

// Every data-parallel rank trains with the same options, else every one fails with Error(mismatch).
// The two 32-bit halves of the fingerprint are exact in a double.
void require_agreement(Trainee &trainee, std::uint64_t fingerprint) {
    bool same = true;
    for (const double half : {double(fingerprint >> 32), double(fingerprint & 0xffffffffu)})
        same = same && trainee.allreduce_over_data(half, ReduceOp::max) == -trainee.allreduce_over_data(-half, ReduceOp::max);
    require(same, ErrorCode::mismatch, "train: the training options differ across ranks (every rank must train with the "
                                       "same options)");
}

class Loop {
  public:
    Loop(Trainee &trainee, const BatchFunction &model, const TrainingOptions &o)
        : target_(trainee), model_(model), o_(o),
          packed_bytes_(trainee.layout().element_count() * trainee.layout().element_size()), keeper_(o.tolerance),
          memory_(trainee.batch_memory(o.device_batches)) {}

    TrainingResult run() {
        const std::int64_t n = o_.num_samples, batch = o_.effective_batch();
        const std::int64_t batches_per_epoch = (n + batch - 1) / batch;
        std::int64_t total_steps = batches_per_epoch * (std::int64_t(o_.first_epoch) + o_.max_epochs);
        if (o_.max_steps > 0) total_steps = std::min(total_steps, o_.max_steps);
        const LearningRateSchedule &schedule = o_.schedule;
        const bool scheduled = schedule.kind != LrScheduleKind::constant;
        const double base = target_.learning_rate();
        std::function<void(std::int64_t)> per_step;
        if (scheduled && schedule.per_step)
            per_step = [&](std::int64_t step) { target_.set_learning_rate(schedule.rate(step, base, total_steps)); };

        std::int64_t step = 0; // steps counted so far, the resumed ones included
        for (int e = 0; e < o_.max_epochs; ++e) {
            const int epoch = o_.first_epoch + e;
            if (scheduled && !schedule.per_step)
                target_.set_learning_rate(schedule.rate(epoch, base, std::int64_t(o_.first_epoch) + o_.max_epochs));
            const std::vector<std::int64_t> order = epoch_order(n, o_.shuffle, o_.seed, epoch);
            EpochPlan plan;
            plan.epoch = epoch;
            plan.starts_call = !ran_an_epoch_;
            plan.order = &order;
            plan.batch = batch;
            plan.steps_before = step;
            plan.first_batch = std::clamp<std::int64_t>(o_.start_step - step, 0, batches_per_epoch);
            plan.end_batch = o_.max_steps > 0 ? std::min(batches_per_epoch, o_.max_steps - step) : batches_per_epoch;
            plan.before_step = per_step;
            plan.model = &model_;
            plan.memory = memory_.get();
            plan.after_step = &o_.after_step;
            if (plan.first_batch < plan.end_batch && per_step) per_step(step + plan.first_batch);
            const double first_rate = target_.learning_rate();
            EpochOutcome outcome;
            if (plan.first_batch < plan.end_batch) {
                outcome = target_.run_epoch(plan);
                ran_an_epoch_ = true;
            }
            step += plan.end_batch;
            const bool hit_limit = o_.max_steps > 0 && step >= o_.max_steps;
            if (outcome.batches == 0) { // done before a resume
                if (hit_limit) break;
                continue;
            }
            end_epoch(epoch, outcome, first_rate, step);
            if (hit_limit) break;
            if (o_.early_stopping && e + 1 < o_.max_epochs &&
                target_.should_early_stop(keeper_.epochs_without_progress() >= o_.patience)) {
                result_.stopped_early = true;
                break;
            }
        }
        result_.steps = step;
        if (!kept_) keep_current(); // nothing was trained: the parameters as they are
        result_.best_epoch = keeper_.best_epoch() < 0 ? 0 : keeper_.best_epoch();
        result_.best_score = keeper_.best_score();
        if (o_.evaluate_best) evaluate_best(step);
        return std::move(result_);
    }

  private:
    void end_epoch(int epoch, const EpochOutcome &outcome, double rate, std::int64_t step) {
        const double training_loss = outcome.mean_loss;
        double validation_loss = std::numeric_limits<double>::quiet_NaN();
        if (o_.num_validation_samples > 0) {
            memory_->read_parameters();
            validation_loss = evaluate(Dataset::validation, o_.num_validation_samples, epoch, step);
        }
        ++result_.epochs;
        result_.training_loss_history.push_back(training_loss);
        result_.validation_loss_history.push_back(validation_loss);
        result_.learning_rate_history.push_back(rate);
        const double score = o_.num_validation_samples > 0 ? validation_loss : training_loss;
        if (keeper_.record(epoch, score)) {
            if (o_.num_validation_samples > 0) {
                result_.best_parameters.resize(packed_bytes_);
                memory_->store(result_.best_parameters.data()); // read for the validation already
                kept_ = true;
            } else {
                keep_current();
            }
        }
    }

    void keep_current() {
        result_.best_parameters.resize(packed_bytes_);
        target_.get_parameters(result_.best_parameters.data());
        kept_ = true;
    }

    // The mean loss over a whole set at the batch memory's parameters: each data-parallel rank
    // takes its slice.
    double evaluate(Dataset dataset, std::int64_t count, int epoch, std::int64_t step) {
        const CommunicatorPtr data = target_.data_group();
        const BatchSlice slice = batch_slice(0, count, data->rank(), data->size());
        double local = 0.0;
        if (slice.size() > 0) {
            const std::vector<std::int64_t> samples = slice.indices();
            Batch b;
            memory_->describe(b);
            b.dataset = dataset;
            b.params = memory_->params();
            b.samples = samples.data();
            b.sample_count = samples.size();
            b.epoch = epoch;
            b.step = step;
            local = model_(b) * slice.weight;
        }
        const double loss = target_.allreduce_over_data(local, ReduceOp::avg);
        require_finite_loss(loss, dataset, epoch, step, "the data-parallel ranks");
        return loss;
    }

    void evaluate_best(std::int64_t step) {
        memory_->load(result_.best_parameters.data());
        const int epoch = result_.best_epoch;
        result_.training_loss = evaluate(Dataset::training, o_.num_samples, epoch, step);
        if (o_.num_validation_samples > 0)
            result_.validation_loss = evaluate(Dataset::validation, o_.num_validation_samples, epoch, step);
        if (o_.num_test_samples > 0)
            result_.test_loss = evaluate(Dataset::test, o_.num_test_samples, epoch, step);
    }

    Trainee &target_;
    const BatchFunction &model_;
    const TrainingOptions &o_;
    std::size_t packed_bytes_;
    ScoreKeeper keeper_;
    TrainingResult result_;
    std::unique_ptr<BatchMemory> memory_;
    bool kept_ = false;
    bool ran_an_epoch_ = false;
};

} // namespace

void require_finite_loss(double loss, Dataset dataset, int epoch, std::int64_t step, const char *over) {
    if (std::isfinite(loss)) return;
    throw Error(ErrorCode::invalid_state, std::string("train: the ") + dataset_name(dataset) + " loss is " +
                                              (std::isnan(loss) ? "NaN" : "infinite") + " at epoch " +
                                              std::to_string(epoch + 1) + ", step " + std::to_string(step + 1) +
                                              " (averaged over " + over + ")");
}

TrainingResult train(Trainee &trainee, const BatchFunction &model, const TrainingOptions &options) {
    require_agreement(trainee, options_fingerprint(options));
    return Loop(trainee, model, options).run();
}

} // namespace shardopt::training

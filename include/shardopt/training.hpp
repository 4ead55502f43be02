// The training policy every language shares: ShardedOptimizer::train() (docs/training.md).
//
// One loop over epochs of a training set split across the data-parallel ranks: the sample order
// of each epoch (shuffled from a seed, the same on every rank), a learning-rate schedule, a
// validation score, the best solution, early stopping voted across ranks, and the losses of the
// best solution on each data set. Its defaults are AiDotNet's. The C ABI's shardopt_optimizer_train
// and every binding's Optimize are this function; nothing above it restates a default or a rule.
//
// Words, one meaning each: an epoch is one pass over the training set (AiDotNet's "iteration",
// so MaxIterations is max_epochs); a step is one optimizer step on one global batch. The score of
// an epoch is its validation loss when there is a validation set, else its mean training loss.
// The best epoch is the first with the lowest score. Early stopping ends training once `patience`
// epochs in a row have not lowered the score by more than `tolerance` below the last epoch that
// did; the tolerance decides what counts as progress, never which epoch is best.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

namespace shardopt {

struct StepResult; // shardopt/sharded_optimizer.hpp

enum class Dataset { training = 0, validation = 1, test = 2 };
const char *dataset_name(Dataset d) noexcept;

// What the model is asked for: the mean loss over `samples` of `dataset` at `params` and, when
// `grad` is not null, the mean gradient into it (packed, zeroed on entry). Host memory, or with
// TrainingOptions::device_batches the optimizer's device memory (on_device).
struct Batch {
    Dataset dataset = Dataset::training;
    const void *params = nullptr;
    void *grad = nullptr; // null: loss only
    const std::int64_t *samples = nullptr;
    std::size_t sample_count = 0; // >= 1
    int epoch = 0;                // from 0
    std::int64_t step = 0;        // optimizer steps before this batch, over every epoch
    // device_batches: params and grad are device memory of CUDA device `device`, params ready and
    // grad zeroed in the order of `cuda_stream` (a cudaStream_t; null: the legacy default stream).
    // The model enqueues its work there, or orders that stream after its own before it returns:
    // the library's next work on the gradient is enqueued there after the call.
    bool on_device = false;
    int device = -1;
    void *cuda_stream = nullptr;
};
using BatchFunction = std::function<double(const Batch &)>;

enum class LrScheduleKind { constant = 0, warmup, cosine, step_decay, warmup_cosine, warmup_step_decay, custom };

// The learning rate as a function of t (epochs, or steps when per_step) and base, the optimizer's
// rate when training starts.
struct LearningRateSchedule {
    LrScheduleKind kind = LrScheduleKind::constant;
    bool per_step = false;
    std::int64_t warmup = 0;       // warm-up kinds: t of linear warm-up, base * (t + 1) / warmup
    std::int64_t decay_period = 0; // cosine: its span (0 = to the end); step decay: t per decay (0 = 1)
    double min_lr = 0.0;           // cosine: where it ends
    double gamma = 0.1;            // step decay: the factor per period
    std::function<double(std::int64_t t, double base)> custom;

    // Throws Error(invalid_argument) naming the bad field.
    void validate() const;
    // The rate at t; `span` is the length of training in t's unit (the cosine's default period).
    // Throws Error(invalid_argument) for a custom rate that is not finite and >= 0.
    double rate(std::int64_t t, double base, std::int64_t span) const;
};

struct TrainingOptions {
    std::int64_t num_samples = 0; // training set size (>= 1); no default
    std::int64_t num_validation_samples = 0;
    std::int64_t num_test_samples = 0;
    std::int64_t batch_size = 32; // samples per step over all ranks; 0 = the whole set
    int max_epochs = 100;         // AiDotNet's MaxIterations
    std::int64_t max_steps = 0;   // 0 = no limit
    bool shuffle = true;
    std::uint64_t seed = 0;
    bool early_stopping = true;
    int patience = 10;
    double tolerance = 1e-6;
    LearningRateSchedule schedule;
    bool evaluate_best = true; // the best solution's loss over each whole set, after training
    // The model on the device: with an optimizer in cuda memory, each batch's params and grad are
    // packed buffers in its device memory (Batch::on_device), filled and read device to device;
    // false: host copies around each call. Error(invalid_argument) for an optimizer in host memory.
    bool device_batches = false;

    // C++ only. first_epoch: the epoch number of the first epoch, as far as the shuffle order
    // goes (a loop calling train once per epoch passes its epoch). start_step: resuming a run
    // (ElasticOptimizer): its first start_step steps were done before; they are skipped without
    // model calls and count towards max_steps and the result's steps; epochs skipped whole are not
    // in the histories. after_step: called on every rank after each step (it may run collectives).
    int first_epoch = 0;
    std::int64_t start_step = 0;
    std::function<void(const StepResult &)> after_step;

    // Throws Error(invalid_argument) naming the bad field; num_samples 0 passes when
    // require_samples is false (options checked before the training set is known).
    void validate(bool require_samples = true) const;
    // Elements of a batch: batch_size, or the whole set for 0 (and never more than the set).
    std::int64_t effective_batch() const noexcept;
};

struct TrainingResult {
    std::vector<unsigned char> best_parameters; // packed, the parameter set's dtype
    std::vector<double> training_loss_history;   // per epoch run
    std::vector<double> validation_loss_history; // per epoch run (NaN without a validation set)
    std::vector<double> learning_rate_history;   // the rate of each epoch's first step
    int epochs = 0;
    std::int64_t steps = 0;
    int best_epoch = 0;
    double best_score = std::numeric_limits<double>::infinity();
    bool stopped_early = false;
    double training_loss = std::numeric_limits<double>::quiet_NaN(); // evaluate_best
    double validation_loss = std::numeric_limits<double>::quiet_NaN();
    double test_loss = std::numeric_limits<double>::quiet_NaN();
};

} // namespace shardopt

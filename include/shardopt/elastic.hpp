// ElasticOptimizer: a ShardedOptimizer whose job survives losing ranks. It checkpoints every k
// steps without stopping training (AsyncCheckpoint: the state is copied to host memory at the
// step boundary, written by a background thread, published atomically once every rank has
// written), and, when it is created, resumes from the latest complete checkpoint in its
// directory, resharded to the world it finds: any world size from min_workers to max_workers.
//
// Restarting the job at a new world size is the launcher's part: `shardopt-run --elastic --min N
// --max M --checkpoint-dir D` starts the ranks again, with the survivors, when one dies or a host
// is cut off (docs/elastic.md). A restarted rank builds its ElasticOptimizer as the first run
// did and continues from its step_count(): it loses at most the steps since the last
// checkpoint.
//
//   auto elastic = ElasticOptimizer::create(comm, layout, adam, sharding, {2, 8});
//   ShardedOptimizer &opt = elastic->wrapped();
//   for (std::int64_t s = opt.step_count(); s < total_steps; ++s) {   // resumes where it was
//       opt.zero_grad();  ...gradients of batch s...;  elastic->step();
//   }
//   elastic->finish_checkpoint();
//
// The checkpoint directory must be one every rank reads and writes (several hosts: a shared
// file system) and belongs to one job: a new job started on a directory holding another run's
// checkpoint resumes that run (or fails, naming the difference, when the model differs).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "shardopt/async_checkpoint.hpp"
#include "shardopt/sharded_optimizer.hpp"

namespace shardopt {

struct ElasticOptions {
    // The world sizes this job may run at (AiDotNet's minWorkers and maxWorkers).
    int min_workers = 1;
    int max_workers = 1024;
    // Where checkpoints go. Empty: $SHARDOPT_CHECKPOINT_DIR (set by shardopt-run --elastic
    // --checkpoint-dir).
    std::string checkpoint_dir;
    // Optimizer steps between checkpoints (> 0). 0: $SHARDOPT_CHECKPOINT_EVERY, else 100.
    int checkpoint_every = 0;

    // Checks the fields on their own (Error(invalid_argument) naming the first bad one), as the
    // ElasticOptimizer does before it resolves the directory and the interval from the environment.
    void validate() const;
};

// The last checkpoint's costs (zero before the first).
struct ElasticStats {
    std::int64_t checkpoints_published = 0; // by this process
    double snapshot_seconds = 0.0;          // copying the shard at the step boundary
    double write_seconds = 0.0;             // writing it, in the background
    double publish_seconds = 0.0;           // its polls and agreements, between steps
    std::size_t snapshot_bytes = 0;         // host memory the copy held
};

class ElasticOptimizer {
  public:
    // Collective over wrapped's communicator. Checks the options (Error(invalid_argument)) and
    // that the world size lies in [min_workers, max_workers] (Error(invalid_state) naming both),
    // then loads the latest complete checkpoint in the directory when there is one (every rank
    // throws, changing nothing, when it does not load). `wrapped` must outlive this object.
    ElasticOptimizer(ShardedOptimizer &wrapped, const ElasticOptions &options);
    // Creates the ShardedOptimizer (as ShardedOptimizer::create) and wraps it, owning it.
    static std::unique_ptr<ElasticOptimizer> create(CommunicatorPtr comm, ParameterSet layout,
                                                    const OptimizerOptions &optimizer, const ShardingOptions &sharding,
                                                    const ElasticOptions &elastic, const void *initial = nullptr);
    // Waits for a checkpoint being written; publishes nothing (see finish_checkpoint).
    ~ElasticOptimizer();
    ElasticOptimizer(const ElasticOptimizer &) = delete;
    ElasticOptimizer &operator=(const ElasticOptimizer &) = delete;

    // The optimizer driven through the step protocol (zero_grad, gradients, grad_ready).
    ShardedOptimizer &wrapped() noexcept { return wrapped_; }
    // The options in force: the directory and interval resolved from the environment.
    const ElasticOptions &options() const noexcept { return options_; }

    // wrapped().step(), then the checkpoint schedule: the checkpoint being written is moved on
    // (AsyncCheckpoint::poll: one small allreduce per step while one is pending), and at a step
    // count that is a multiple of checkpoint_every a new one is taken (after finishing the
    // previous one, waiting for its files if they are still being written).
    StepResult step();
    // wrapped().optimize() with the schedule after every step. After a resume, the calls skip,
    // between them, the iterations the checkpoint covers (step_count() x gradient accumulation
    // steps, counted from the first call's first iteration), so a training run of one call, or of
    // one call per epoch, continues where the job stopped.
    OptimizeResult optimize(const ModelFunction &model, const OptimizeOptions &options);
    // wrapped().train() the same way (the skipped steps in TrainingOptions::start_step).
    TrainingResult train(const BatchFunction &model, const TrainingOptions &options);
    // Collective: a checkpoint now, at a step boundary (the previous one finished first).
    void checkpoint();
    // Collective: waits for the checkpoint being written, if any, and publishes it. Call it at
    // the end of training, or before leaving at a step the job should resume from. When a
    // write failed, every rank throws its error, and the previous checkpoint stays the latest.
    void finish_checkpoint();

    // The step count loaded when it was created; -1 when it started without a checkpoint.
    std::int64_t resumed_step() const noexcept { return resumed_step_; }
    // The latest complete checkpoint's step count (published here, or loaded); -1 for none.
    std::int64_t last_checkpoint_step() const noexcept { return last_checkpoint_step_; }
    bool checkpoint_pending() const noexcept { return pending_ != nullptr; }
    // Restarts of the job before this run ($SHARDOPT_ELASTIC_GENERATION, set by shardopt-run
    // --elastic; else torchrun's $TORCHELASTIC_RESTART_COUNT; 0 without either).
    int generation() const noexcept { return generation_; }
    ElasticStats stats() const noexcept { return stats_; }

  private:
    ElasticOptimizer(std::unique_ptr<ShardedOptimizer> owned, const ElasticOptions &options);
    void resume(); // the constructors' collective part
    void after_step(const StepResult &result);
    void retire_pending(); // the pending checkpoint is complete


    std::unique_ptr<ShardedOptimizer> owned_; // set by create()
    ShardedOptimizer &wrapped_;
    ElasticOptions options_;
    std::unique_ptr<AsyncCheckpoint> pending_;
    std::int64_t resumed_step_ = -1;
    std::int64_t last_checkpoint_step_ = -1;
    std::int64_t last_snapshot_step_ = -1;
    std::int64_t skip_iterations_ = 0; // for the first optimize() after a resume
    double pending_seconds_ = 0.0;     // the pending checkpoint's polls so far
    int generation_ = 0;
    ElasticStats stats_;
};

} // namespace shardopt

// ElasticOptimizer: the checkpoint schedule around a ShardedOptimizer, and the resume at start.
// The files and the resharding are the sharded checkpoint's (AsyncCheckpoint, load()); what is
// here is when to take, publish and load them.
#include "shardopt/elastic.hpp"
#include "../elapsed.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>

#include "../training/optimize_options.hpp"
#include "shardopt/error.hpp"

namespace shardopt {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kDefaultCheckpointEvery = 100;
constexpr const char *kManifestFile = "checkpoint.shardopt"; // what save() publishes last

// A positive integer from the environment variable `name`; `fallback` when it is unset.
long long env_count(const char *name, long long fallback, long long least) {
    const char *text = std::getenv(name);
    if (!text || !*text) return fallback;
    errno = 0;
    char *end = nullptr;
    const long long v = std::strtoll(text, &end, 10);
    require(end != text && *end == '\0' && errno == 0 && v >= least, ErrorCode::invalid_argument,
            std::string("ElasticOptimizer: ") + name + "='" + text + "' is not an integer >= " + std::to_string(least));
    return v;
}

ElasticOptions resolved(const ElasticOptions &given) {
    ElasticOptions o = given;
    o.validate();
    if (o.checkpoint_every == 0)
        o.checkpoint_every = int(env_count("SHARDOPT_CHECKPOINT_EVERY", kDefaultCheckpointEvery, 1));
    if (o.checkpoint_dir.empty())
        if (const char *dir = std::getenv("SHARDOPT_CHECKPOINT_DIR")) o.checkpoint_dir = dir;
    require(!o.checkpoint_dir.empty(), ErrorCode::invalid_argument,
            "ElasticOptimizer: no checkpoint directory: set ElasticOptions::checkpoint_dir, or "
            "SHARDOPT_CHECKPOINT_DIR (shardopt-run --elastic --checkpoint-dir DIR)");
    return o;
}

bool file_exists(const std::string &path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

} // namespace

void ElasticOptions::validate() const {
    require(min_workers >= 1, ErrorCode::invalid_argument,
            "ElasticOptimizer: minWorkers is " + std::to_string(min_workers) + "; it must be at least 1");
    require(max_workers >= min_workers, ErrorCode::invalid_argument,
            "ElasticOptimizer: maxWorkers " + std::to_string(max_workers) + " is below minWorkers " +
                std::to_string(min_workers));
    require(checkpoint_every >= 0, ErrorCode::invalid_argument,
            "ElasticOptimizer: checkpoint_every is " + std::to_string(checkpoint_every) +
                "; it must be > 0 (or 0 for $SHARDOPT_CHECKPOINT_EVERY, else " +
                std::to_string(kDefaultCheckpointEvery) + ")");
}

ElasticOptimizer::ElasticOptimizer(ShardedOptimizer &wrapped, const ElasticOptions &options)
    : wrapped_(wrapped), options_(resolved(options)) {
    resume();
}

ElasticOptimizer::ElasticOptimizer(std::unique_ptr<ShardedOptimizer> owned, const ElasticOptions &options)
    : owned_(std::move(owned)), wrapped_(*owned_), options_(resolved(options)) {
    resume();
}

std::unique_ptr<ElasticOptimizer> ElasticOptimizer::create(CommunicatorPtr comm, ParameterSet layout,
                                                           const OptimizerOptions &optimizer,
                                                           const ShardingOptions &sharding,
                                                           const ElasticOptions &elastic, const void *initial) {
    resolved(elastic); // bad options fail before the collective creation
    auto opt = ShardedOptimizer::create(std::move(comm), std::move(layout), optimizer, sharding, initial);
    return std::unique_ptr<ElasticOptimizer>(new ElasticOptimizer(std::move(opt), elastic));
}

ElasticOptimizer::~ElasticOptimizer() = default;

void ElasticOptimizer::resume() {
    const int world = wrapped_.world_size();
    require(world >= options_.min_workers && world <= options_.max_workers, ErrorCode::invalid_state,
            "ElasticOptimizer: the world has " + std::to_string(world) + " ranks, outside [minWorkers " +
                std::to_string(options_.min_workers) + ", maxWorkers " + std::to_string(options_.max_workers) + "]");
    // shardopt-run --elastic numbers its generations; torchrun (elastic agent) counts its restarts
    generation_ = int(env_count("SHARDOPT_ELASTIC_GENERATION", env_count("TORCHELASTIC_RESTART_COUNT", 0, 0), 0));
    // Whether any rank sees a published checkpoint (a vote over the world, on any memory space).
    // A rank that does not see it (no shared file system) then fails the load, and so does
    // every rank, naming the missing file.
    const std::string manifest = options_.checkpoint_dir + "/" + kManifestFile;
    if (!wrapped_.should_early_stop(file_exists(manifest))) return;
    wrapped_.load(options_.checkpoint_dir);
    resumed_step_ = last_checkpoint_step_ = last_snapshot_step_ = wrapped_.step_count();
    const int accumulation = wrapped_.options().gradient_accumulation_steps;
    skip_iterations_ = resumed_step_ * std::int64_t(accumulation > 0 ? accumulation : 1);
}

StepResult ElasticOptimizer::step() {
    const StepResult result = wrapped_.step();
    after_step(result);
    return result;
}

TrainingResult ElasticOptimizer::train(const BatchFunction &model, const TrainingOptions &options) {
    TrainingOptions o = options;
    o.start_step += skip_iterations_;
    const auto caller_hook = options.after_step;
    o.after_step = [this, &caller_hook](const StepResult &r) {
        after_step(r);
        if (caller_hook) caller_hook(r);
    };
    TrainingResult result = wrapped_.train(model, o);
    // What this call did not cover is left for the next (a loop calling it once per epoch).
    skip_iterations_ = std::max<std::int64_t>(0, skip_iterations_ - result.steps);
    return result;
}

OptimizeResult ElasticOptimizer::optimize(const ModelFunction &model, const OptimizeOptions &options) {
    return training::optimize_result_of(
        train(training::batch_function_of(model), training::training_options_of(options)));
}

void ElasticOptimizer::after_step(const StepResult &result) {
    if (pending_) {
        const auto start = Clock::now();
        bool complete = false;
        try {
            complete = pending_->poll();
        } catch (...) {
            pending_.reset(); // failed on every rank: the previous checkpoint stays the latest
            throw;
        }
        pending_seconds_ += seconds_since(start);
        if (complete) retire_pending();
    }
    const std::int64_t steps = wrapped_.step_count();
    if (result.accumulating || steps <= last_snapshot_step_ || steps % options_.checkpoint_every != 0) return;
    checkpoint();
}

void ElasticOptimizer::checkpoint() {
    finish_checkpoint();
    const auto start = Clock::now();
    pending_ = wrapped_.save_async(options_.checkpoint_dir);
    pending_seconds_ = 0.0;
    last_snapshot_step_ = pending_->step_count();
    stats_.snapshot_seconds = seconds_since(start);
    stats_.snapshot_bytes = pending_->snapshot_bytes();
}

void ElasticOptimizer::finish_checkpoint() {
    if (!pending_) return;
    const auto start = Clock::now();
    try {
        pending_->finish();
    } catch (...) {
        pending_.reset(); // failed on every rank: the previous checkpoint stays the latest
        throw;
    }
    pending_seconds_ += seconds_since(start);
    retire_pending();
}

void ElasticOptimizer::retire_pending() {
    stats_.publish_seconds = pending_seconds_;
    stats_.write_seconds = pending_->write_seconds();
    last_checkpoint_step_ = pending_->step_count();
    ++stats_.checkpoints_published;
    pending_.reset();
}

} // namespace shardopt

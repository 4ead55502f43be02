#include "optimize_options.hpp"

#include <utility>

#include "shardopt/error.hpp"

namespace shardopt::training {

void check_optimize_options(const ModelFunction &model, const OptimizeOptions &o) {
    require(bool(model), ErrorCode::invalid_argument, "optimize: model function is null");
    require(o.num_samples > 0, ErrorCode::invalid_argument, "optimize: num_samples must be > 0");
    require(o.batch_size >= 0, ErrorCode::invalid_argument, "optimize: batch_size must be >= 0");
    require(o.epochs >= 1, ErrorCode::invalid_argument, "optimize: epochs must be >= 1");
    require(o.first_epoch >= 0, ErrorCode::invalid_argument, "optimize: first_epoch must be >= 0");
    require(o.start_iteration >= 0, ErrorCode::invalid_argument, "optimize: start_iteration must be >= 0");
    require(o.max_iterations >= 0 && o.patience >= 0 && o.min_delta >= 0.0, ErrorCode::invalid_argument,
            "optimize: max_iterations, patience and min_delta must be >= 0");
}

TrainingOptions training_options_of(const OptimizeOptions &o) {
    TrainingOptions t;
    t.num_samples = o.num_samples;
    t.batch_size = o.batch_size; // 0 = the whole set in both
    t.max_epochs = o.epochs;
    t.max_steps = o.max_iterations;
    t.shuffle = o.shuffle;
    t.seed = o.seed;
    t.early_stopping = o.patience > 0;
    t.patience = o.patience > 0 ? o.patience : 1;
    t.tolerance = o.min_delta;
    t.evaluate_best = false;
    t.first_epoch = o.first_epoch;
    t.start_step = o.start_iteration;
    t.after_step = o.after_step;
    return t;
}

BatchFunction batch_function_of(const ModelFunction &model) {
    return [model](const Batch &b) { return model(b.params, b.grad, b.samples, b.sample_count); };
}

OptimizeResult optimize_result_of(TrainingResult &&r) {
    OptimizeResult o;
    o.best_parameters = std::move(r.best_parameters);
    o.best_loss = r.best_score;
    o.loss_history = std::move(r.training_loss_history);
    o.iterations = r.steps;
    o.stopped_early = r.stopped_early;
    return o;
}

} // namespace shardopt::training

#include "optimize_options.hpp"

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

} // namespace shardopt::training

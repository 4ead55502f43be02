#include "sharding_configuration.hpp"

#include <cmath>
#include <string>
#include <utility>

#include "shardopt/error.hpp"
#include "strategies/strategy_plan.hpp"

namespace shardopt {

ParameterSet bucketed_layout(ParameterSet layout, const ShardingOptions &sharding) {
    if (sharding.parameter_group_size > 0) layout.set_bucket_bytes(sharding.parameter_group_size * layout.element_size());
    return layout;
}

void validate_auto_sync(const ShardingOptions &s) {
    require(s.auto_sync_gradients || s.strategy == Strategy::ddp || s.strategy == Strategy::zero1 ||
                s.strategy == Strategy::local_sgd,
            ErrorCode::invalid_argument,
            std::string("sharding options: auto_sync_gradients off (Local SGD) needs replicated parameters, but ") +
                strategy_name(s.strategy) + " reduces gradients every step");
}

ResolvedConfiguration resolve_configuration(ParameterSet layout, OptimizerOptions optimizer, ShardingOptions s) {
    require(std::isfinite(s.learning_rate) && s.learning_rate >= 0.0, ErrorCode::invalid_argument,
            "sharding options: learning_rate must be finite and >= 0 (0 = the optimizer options' rate; got " +
                std::to_string(s.learning_rate) + ")");
    if (s.learning_rate > 0.0) optimizer.lr = s.learning_rate;
    validate_auto_sync(s);
    if (!s.auto_sync_gradients) s.strategy = Strategy::local_sgd;
    s.learning_rate = 0.0; // resolved: what the optimizer and checkpoints see
    s.auto_sync_gradients = true;
    ResolvedConfiguration r{bucketed_layout(std::move(layout), s), std::move(optimizer), s};
    r.sharding.parameter_group_size = 0;
    return r;
}

} // namespace shardopt

// Versioned options structs: defaults (shardopt_*_options_init_sized) and conversion to the C++
// option types.
#include "capi_internal.hpp"
#include "options_convert.hpp"

using namespace shardopt;
using namespace shardopt::capi;

namespace shardopt::capi {

namespace {
// Writes the first struct_size bytes of `defaults` into *opts (the caller's struct may be older).
template <typename T> void init_sized(T *opts, size_t struct_size, const T &defaults, const char *name) {
    not_null(opts, name);
    require(struct_size >= sizeof(std::size_t) + sizeof(std::int32_t), ErrorCode::invalid_argument,
            std::string(name) + ": struct_size " + std::to_string(struct_size) + " is too small");
    const std::size_t n = struct_size < sizeof(T) ? struct_size : sizeof(T);
    T copy = defaults;
    copy.struct_size = struct_size;
    std::memcpy(static_cast<void *>(opts), &copy, n);
}

shardopt_optimizer_options to_c(const OptimizerOptions &o) {
    shardopt_optimizer_options c{};
    c.struct_size = sizeof c;
    c.kind = shardopt_optimizer_kind(o.kind);
    c.lr = o.lr;
    c.weight_decay = o.weight_decay;
    c.maximize = o.maximize;
    c.momentum = o.momentum;
    c.dampening = o.dampening;
    c.nesterov = o.nesterov;
    c.beta1 = o.beta1;
    c.beta2 = o.beta2;
    c.eps = o.eps;
    c.amsgrad = o.amsgrad;
    c.alpha = o.alpha;
    c.centered = o.centered;
    c.lr_decay = o.lr_decay;
    c.initial_accumulator_value = o.initial_accumulator_value;
    return c;
}

shardopt_sharding_options sharding_defaults() {
    const ShardingOptions o;
    shardopt_sharding_options c{};
    c.struct_size = sizeof c;
    c.strategy = shardopt_strategy(o.strategy);
    c.gradient_accumulation_steps = o.gradient_accumulation_steps;
    c.max_grad_norm = o.max_grad_norm;
    c.skip_nonfinite = o.skip_nonfinite;
    c.staging_buffers = o.staging_buffers;
    c.fsdp_prefetch = o.fsdp_prefetch;
    c.pipeline_parallel_size = o.pipeline_parallel_size;
    c.tensor_parallel_size = o.tensor_parallel_size;
    c.data_parallel_size = o.data_parallel_size;
    c.hybrid_data_strategy = shardopt_strategy(o.hybrid_data_strategy);
    c.hsdp_replicas = o.hsdp_replicas;
    c.local_sgd_period = o.local_sgd_period;
    return c;
}

shardopt_optimize_options optimize_defaults() {
    const OptimizeOptions o;
    shardopt_optimize_options c{};
    c.struct_size = sizeof c;
    c.num_samples = o.num_samples;
    c.batch_size = o.batch_size;
    c.epochs = o.epochs;
    c.max_iterations = o.max_iterations;
    c.patience = o.patience;
    c.min_delta = o.min_delta;
    return c;
}

OptimizerKind kind_arg(int kind) {
    require(kind >= 0 && kind <= int(OptimizerKind::lamb), ErrorCode::invalid_argument,
            "invalid optimizer kind " + std::to_string(kind));
    return OptimizerKind(kind);
}
Strategy strategy_arg(int s, const char *field) {
    require(s >= 0 && s <= int(Strategy::local_sgd), ErrorCode::invalid_argument,
            std::string(field) + ": invalid strategy " + std::to_string(s));
    return Strategy(s);
}
} // namespace

OptimizerOptions optimizer_options_from(const shardopt_optimizer_options *user) {
    const auto c0 = read_struct(user, to_c(OptimizerOptions::defaults(OptimizerKind::adam)), "optimizer options");
    // Fields the caller's (older) struct lacks take the defaults of the kind it asked for.
    const auto c = read_struct(user, to_c(OptimizerOptions::defaults(kind_arg(c0.kind))), "optimizer options");
    OptimizerOptions o;
    o.kind = kind_arg(c.kind);
    o.lr = c.lr;
    o.weight_decay = c.weight_decay;
    o.maximize = c.maximize != 0;
    o.momentum = c.momentum;
    o.dampening = c.dampening;
    o.nesterov = c.nesterov != 0;
    o.beta1 = c.beta1;
    o.beta2 = c.beta2;
    o.eps = c.eps;
    o.amsgrad = c.amsgrad != 0;
    o.alpha = c.alpha;
    o.centered = c.centered != 0;
    o.lr_decay = c.lr_decay;
    o.initial_accumulator_value = c.initial_accumulator_value;
    o.validate();
    return o;
}

ShardingOptions sharding_options_from(const shardopt_sharding_options *user) {
    const auto c = read_struct(user, sharding_defaults(), "sharding options");
    ShardingOptions o;
    o.strategy = strategy_arg(c.strategy, "strategy");
    o.gradient_accumulation_steps = c.gradient_accumulation_steps;
    o.max_grad_norm = c.max_grad_norm;
    o.skip_nonfinite = c.skip_nonfinite != 0;
    o.staging_buffers = c.staging_buffers;
    o.fsdp_prefetch = c.fsdp_prefetch != 0;
    o.pipeline_parallel_size = c.pipeline_parallel_size;
    o.tensor_parallel_size = c.tensor_parallel_size;
    o.data_parallel_size = c.data_parallel_size;
    o.hybrid_data_strategy = strategy_arg(c.hybrid_data_strategy, "hybrid_data_strategy");
    o.hsdp_replicas = c.hsdp_replicas;
    o.local_sgd_period = c.local_sgd_period;
    return o;
}

OptimizeOptions optimize_options_from(const shardopt_optimize_options *user) {
    const auto c = read_struct(user, optimize_defaults(), "optimize options");
    OptimizeOptions o;
    o.num_samples = c.num_samples;
    o.batch_size = c.batch_size;
    o.epochs = c.epochs;
    o.max_iterations = c.max_iterations;
    o.patience = c.patience;
    o.min_delta = c.min_delta;
    return o;
}

} // namespace shardopt::capi

extern "C" {

SHARDOPT_API shardopt_status shardopt_optimizer_options_init_sized(shardopt_optimizer_options *opts,
                                                                   size_t struct_size, shardopt_optimizer_kind kind) {
    return guard(__func__, [&] {
        const auto defaults = to_c(OptimizerOptions::defaults(kind_arg(kind)));
        init_sized(opts, struct_size, defaults, "optimizer options");
    });
}

SHARDOPT_API shardopt_status shardopt_sharding_options_init_sized(shardopt_sharding_options *opts,
                                                                  size_t struct_size) {
    return guard(__func__, [&] { init_sized(opts, struct_size, sharding_defaults(), "sharding options"); });
}

SHARDOPT_API shardopt_status shardopt_optimize_options_init_sized(shardopt_optimize_options *opts,
                                                                  size_t struct_size) {
    return guard(__func__, [&] { init_sized(opts, struct_size, optimize_defaults(), "optimize options"); });
}

} // extern "C"

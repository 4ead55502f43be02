// Versioned options structs: defaults (shardopt_*_options_init_sized) and conversion to the C++
// option types. Zero means default (sharding and optimize options); the optimizer options say
// which fields they set in field_mask.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>

#include "capi_internal.hpp"
#include "options_convert.hpp"

using namespace shardopt;
using namespace shardopt::capi;

namespace shardopt::capi {

namespace {

// The fields of shardopt_optimizer_options after kind, with their field_mask bit.
#define SHARDOPT_OPTIMIZER_FIELDS(X)                                                                           \
    X(LR, lr) X(WEIGHT_DECAY, weight_decay) X(MAXIMIZE, maximize) X(MOMENTUM, momentum) X(DAMPENING, dampening) \
    X(NESTEROV, nesterov) X(BETA1, beta1) X(BETA2, beta2) X(EPS, eps) X(AMSGRAD, amsgrad) X(ALPHA, alpha)       \
    X(CENTERED, centered) X(LR_DECAY, lr_decay) X(INITIAL_ACCUMULATOR_VALUE, initial_accumulator_value)          \
    X(STATE_PRECISION, state_precision) X(MOMENTUM_DECAY, momentum_decay)                                        \
    X(DECOUPLED_WEIGHT_DECAY, decoupled_weight_decay) X(RHO, rho) X(BETA2_DECAY, beta2_decay) X(EPS2, eps2)      \
    X(CLIP_THRESHOLD, clip_threshold) X(NS_STEPS, ns_steps) X(NS_A, ns_a) X(NS_B, ns_b) X(NS_C, ns_c)            \
    X(ADJUST_LR, adjust_lr) X(ADAMW_LR, adamw_lr) X(ADAMW_WEIGHT_DECAY, adamw_weight_decay) X(ADAMW_EPS, adamw_eps)

#define SHARDOPT_FIELD_BIT(BIT, name) | SHARDOPT_OPT_FIELD_##BIT
constexpr std::uint64_t kKnownFields = SHARDOPT_OPT_FIELD_KIND SHARDOPT_OPTIMIZER_FIELDS(SHARDOPT_FIELD_BIT);
#undef SHARDOPT_FIELD_BIT

template <typename T> constexpr std::size_t end_of(std::size_t offset) { return offset + sizeof(T); }
#define SHARDOPT_FIELD_END(name)                                                                                \
    end_of<decltype(shardopt_optimizer_options::name)>(offsetof(shardopt_optimizer_options, name))

// Writes the first struct_size bytes of `full` into *opts (the caller's struct may be older).
template <typename T> void write_prefix(T *opts, std::size_t struct_size, const T &full, std::size_t min_size,
                                        const char *name) {
    not_null(opts, name);
    require(struct_size >= min_size, ErrorCode::invalid_argument,
            std::string(name) + ": struct_size " + std::to_string(struct_size) + " is too small");
    const std::size_t n = struct_size < sizeof(T) ? struct_size : sizeof(T);
    T copy = full;
    copy.struct_size = struct_size;
    std::memcpy(static_cast<void *>(opts), &copy, n);
}

// Every field of `o`, and the field_mask bit of each field that fits in struct_size.
shardopt_optimizer_options to_c(const OptimizerOptions &o, std::size_t struct_size) {
    shardopt_optimizer_options c{};
    c.struct_size = struct_size;
    c.kind = shardopt_optimizer_kind(o.kind);
    if (SHARDOPT_FIELD_END(kind) <= struct_size) c.field_mask |= SHARDOPT_OPT_FIELD_KIND;
#define SHARDOPT_FIELD_TO_C(BIT, name)                                                                          \
    c.name = static_cast<decltype(c.name)>(o.name);                                                            \
    if (SHARDOPT_FIELD_END(name) <= struct_size) c.field_mask |= SHARDOPT_OPT_FIELD_##BIT;
    SHARDOPT_OPTIMIZER_FIELDS(SHARDOPT_FIELD_TO_C)
#undef SHARDOPT_FIELD_TO_C
    return c;
}

shardopt_sharding_options sharding_defaults() {
    const ShardingOptions o;
    shardopt_sharding_options c{};
    c.struct_size = sizeof c;
    c.strategy = shardopt_strategy(o.strategy);
    c.gradient_accumulation_steps = o.gradient_accumulation_steps;
    c.max_grad_norm = o.max_grad_norm;
    c.skip_nonfinite = o.skip_nonfinite ? SHARDOPT_ENABLE : SHARDOPT_DISABLE;
    c.staging_buffers = o.staging_buffers;
    c.fsdp_prefetch = o.fsdp_prefetch ? SHARDOPT_ENABLE : SHARDOPT_DISABLE;
    c.pipeline_parallel_size = o.pipeline_parallel_size;
    c.tensor_parallel_size = o.tensor_parallel_size;
    c.data_parallel_size = o.data_parallel_size;
    c.hybrid_data_strategy = shardopt_strategy(o.hybrid_data_strategy);
    c.hsdp_replicas = o.hsdp_replicas;
    c.local_sgd_period = o.local_sgd_period;
    c.memory = shardopt_memory_space(o.memory);
    c.cuda_stream = o.cuda_stream;
    c.update_threads = o.update_threads;
    c.overlap_param_gather = o.overlap_param_gather ? SHARDOPT_ENABLE : SHARDOPT_DISABLE;
    c.broadcast_initial = o.broadcast_initial ? SHARDOPT_ENABLE : SHARDOPT_DISABLE;
    c.compression = shardopt_compression(o.compression.method);
    c.compression_ratio = o.compression.ratio;
    c.compression_block_size = o.compression.block_size;
    c.power_sgd_rank = o.compression.power_sgd_rank;
    c.power_sgd_min_elements = o.compression.power_sgd_min_elements;
    c.error_feedback = o.compression.error_feedback ? SHARDOPT_ENABLE : SHARDOPT_DISABLE;
    c.cpu_offload_optimizer = o.cpu_offload_optimizer ? SHARDOPT_ENABLE : SHARDOPT_DISABLE;
    c.cpu_offload_gradients = o.cpu_offload_gradients ? SHARDOPT_ENABLE : SHARDOPT_DISABLE;
    c.cpu_offload_params = o.cpu_offload_params ? SHARDOPT_ENABLE : SHARDOPT_DISABLE;
    c.async_staleness = o.async_staleness;
    c.parameter_group_size = std::int64_t(o.parameter_group_size);
    c.learning_rate = o.learning_rate;
    c.auto_sync_gradients = o.auto_sync_gradients ? SHARDOPT_ENABLE : SHARDOPT_DISABLE;
    return c;
}

// AiDotNet's ShardingConfiguration factories.
shardopt_sharding_options sharding_preset(int preset) {
    shardopt_sharding_options c = sharding_defaults();
    c.parameter_group_size = 1024;
    switch (preset) {
    case SHARDOPT_SHARDING_DEFAULT: break;
    case SHARDOPT_SHARDING_HIGH_BANDWIDTH: c.parameter_group_size = 512; break;
    case SHARDOPT_SHARDING_LOW_BANDWIDTH:
        c.parameter_group_size = 4096;
        c.compression = SHARDOPT_COMPRESSION_INT8;
        break;
    case SHARDOPT_SHARDING_ZERO_OFFLOAD_FULL:
        c.cpu_offload_gradients = SHARDOPT_ENABLE;
        c.cpu_offload_params = SHARDOPT_ENABLE;
        [[fallthrough]];
    case SHARDOPT_SHARDING_ZERO_OFFLOAD: c.cpu_offload_optimizer = SHARDOPT_ENABLE; break;
    default:
        throw Error(ErrorCode::invalid_argument,
                    "invalid sharding preset " + std::to_string(preset) + " (a shardopt_sharding_preset)");
    }
    return c;
}

// AiDotNet's base optimizer classes: AiDotNet's documented defaults over torch.optim's.
OptimizerOptions optimizer_preset(int preset) {
    OptimizerOptions o;
    switch (preset) {
    case SHARDOPT_PRESET_SGD: o = OptimizerOptions::defaults(OptimizerKind::sgd); o.lr = 0.01; break;
    case SHARDOPT_PRESET_MOMENTUM:
        o = OptimizerOptions::defaults(OptimizerKind::sgd);
        o.lr = 0.01;
        o.momentum = 0.9;
        break;
    case SHARDOPT_PRESET_ADAM: o = OptimizerOptions::defaults(OptimizerKind::adam); break;
    case SHARDOPT_PRESET_ADAMW: o = OptimizerOptions::defaults(OptimizerKind::adamw); break;
    case SHARDOPT_PRESET_RMSPROP:
        o = OptimizerOptions::defaults(OptimizerKind::rmsprop);
        o.lr = 0.01;
        o.alpha = 0.9;
        o.eps = 1e-8;
        break;
    case SHARDOPT_PRESET_ADAGRAD: o = OptimizerOptions::defaults(OptimizerKind::adagrad); break;
    case SHARDOPT_PRESET_LAMB: o = OptimizerOptions::defaults(OptimizerKind::lamb); break;
    // AiDotNet documents no defaults of its own for these: torch.optim's.
    case SHARDOPT_PRESET_LION: o = OptimizerOptions::defaults(OptimizerKind::lion); break;
    case SHARDOPT_PRESET_ADAFACTOR: o = OptimizerOptions::defaults(OptimizerKind::adafactor); break;
    case SHARDOPT_PRESET_NADAM: o = OptimizerOptions::defaults(OptimizerKind::nadam); break;
    case SHARDOPT_PRESET_ADAMAX: o = OptimizerOptions::defaults(OptimizerKind::adamax); break;
    case SHARDOPT_PRESET_ADADELTA: o = OptimizerOptions::defaults(OptimizerKind::adadelta); break;
    case SHARDOPT_PRESET_MUON: o = OptimizerOptions::defaults(OptimizerKind::muon); break;
    default:
        throw Error(ErrorCode::invalid_argument,
                    "invalid optimizer preset " + std::to_string(preset) + " (a shardopt_optimizer_preset)");
    }
    return o;
}

shardopt_training_options training_defaults() {
    const TrainingOptions o;
    shardopt_training_options c{};
    c.struct_size = sizeof c;
    c.num_samples = o.num_samples;
    c.num_validation_samples = o.num_validation_samples;
    c.num_test_samples = o.num_test_samples;
    c.batch_size = o.batch_size;
    c.max_epochs = o.max_epochs;
    c.max_steps = o.max_steps;
    c.shuffle = o.shuffle;
    c.seed = o.seed;
    c.early_stopping = o.early_stopping;
    c.patience = o.patience;
    c.tolerance = o.tolerance;
    c.lr_schedule = shardopt_lr_schedule(o.schedule.kind);
    c.lr_per_step = o.schedule.per_step;
    c.warmup = o.schedule.warmup;
    c.decay_period = o.schedule.decay_period;
    c.min_lr = o.schedule.min_lr;
    c.gamma = o.schedule.gamma;
    c.evaluate_best = o.evaluate_best;
    c.device_batches = o.device_batches;
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
    c.shuffle = o.shuffle ? SHARDOPT_ENABLE : SHARDOPT_DISABLE;
    c.seed = o.seed;
    c.first_epoch = o.first_epoch;
    return c;
}

// The smallest struct_size each options struct accepts: struct_size and its first field.
constexpr std::size_t kMinOptimizerOptions = offsetof(shardopt_optimizer_options, field_mask) + sizeof(std::uint64_t);
constexpr std::size_t kMinShardingOptions = offsetof(shardopt_sharding_options, strategy) + sizeof(shardopt_strategy);
constexpr std::size_t kMinOptimizeOptions = offsetof(shardopt_optimize_options, num_samples) + sizeof(std::int64_t);
constexpr std::size_t kMinTrainingOptions = offsetof(shardopt_training_options, num_samples) + sizeof(std::int64_t);

// The sharding options' fields (what create checks, less what depends on the world and the memory):
// ranges, enum values, and auto_sync_gradients with the struct's strategy.
void validate_sharding_fields(ShardingOptions o) {
    require(std::isfinite(o.learning_rate) && o.learning_rate >= 0.0, ErrorCode::invalid_argument,
            "sharding options: learning_rate must be finite and >= 0 (0 = the optimizer options' rate)");
    validate_auto_sync(o);
    if (o.strategy != Strategy::async_sgd) o.strategy = Strategy::hybrid; // every strategy's fields allowed here
    // The rules of CUDA memory (ZeRO-Offload's flags against the strategy, which the languages' optimizer classes
    // set after the configuration) depend on a strategy the struct does not hold yet: create's. (A stream with
    // host memory is still refused here.)
    if (o.memory == MemorySpace::cuda) {
        o.memory = MemorySpace::host;
        o.cuda_stream = nullptr;
    }
    validate_sharding_options(o);
}

std::string shown(double v) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", v);
    return text;
}

// The fields where 0 (SHARDOPT_AUTO) stands for a default that _init writes as a value: a 0 there in a struct that
// _init or a preset filled was set by the caller, who meant a value (the _strict check).
#define SHARDOPT_SHARDING_VALUE_FIELDS(X)                                                                       \
    X(gradient_accumulation_steps) X(staging_buffers) X(pipeline_parallel_size) X(tensor_parallel_size)          \
    X(data_parallel_size) X(hsdp_replicas) X(local_sgd_period) X(compression_ratio) X(compression_block_size)   \
    X(power_sgd_rank) X(power_sgd_min_elements)
#define SHARDOPT_SHARDING_SWITCH_FIELDS(X)                                                                      \
    X(skip_nonfinite) X(fsdp_prefetch) X(overlap_param_gather) X(broadcast_initial) X(error_feedback)           \
    X(cpu_offload_optimizer) X(cpu_offload_gradients) X(cpu_offload_params) X(auto_sync_gradients)

void require_sharding_values(const shardopt_sharding_options &c) {
    const shardopt_sharding_options d = sharding_defaults();
#define SHARDOPT_REQUIRE_VALUE(name)                                                                            \
    require_set(c, offsetof(shardopt_sharding_options, name), c.name, shown(double(d.name)), "sharding options", #name);
    SHARDOPT_SHARDING_VALUE_FIELDS(SHARDOPT_REQUIRE_VALUE)
#undef SHARDOPT_REQUIRE_VALUE
#define SHARDOPT_REQUIRE_SWITCH(name)                                                                           \
    require_set(c, offsetof(shardopt_sharding_options, name), int(c.name),                                      \
                d.name == SHARDOPT_ENABLE ? "SHARDOPT_ENABLE" : "SHARDOPT_DISABLE", "sharding options", #name);
    SHARDOPT_SHARDING_SWITCH_FIELDS(SHARDOPT_REQUIRE_SWITCH)
#undef SHARDOPT_REQUIRE_SWITCH
}

// A 0/1 field of the training options.
bool flag_arg(std::int32_t v, const char *field) {
    require(v == 0 || v == 1, ErrorCode::invalid_argument,
            std::string("training options: ") + field + " is " + std::to_string(v) + ", not 0 or 1");
    return v == 1;
}

OptimizerKind kind_arg(int kind) {
    require(kind >= 0 && kind <= int(OptimizerKind::muon), ErrorCode::invalid_argument,
            "invalid optimizer kind " + std::to_string(kind));
    return OptimizerKind(kind);
}
Strategy strategy_arg(int s, const char *field) {
    require(s >= 0 && s <= int(Strategy::async_sgd), ErrorCode::invalid_argument,
            std::string(field) + ": invalid strategy " + std::to_string(s));
    return Strategy(s);
}
MemorySpace memory_arg(int m) {
    require(m == SHARDOPT_MEMORY_HOST || m == SHARDOPT_MEMORY_CUDA, ErrorCode::invalid_argument,
            "sharding options: memory is " + std::to_string(m) +
                ", not a shardopt_memory_space (SHARDOPT_MEMORY_HOST or SHARDOPT_MEMORY_CUDA)");
    return MemorySpace(m);
}
// A shardopt_switch: AUTO is the field's default.
bool switch_arg(int v, bool automatic, const char *field) {
    require(v == SHARDOPT_AUTO || v == SHARDOPT_ENABLE || v == SHARDOPT_DISABLE, ErrorCode::invalid_argument,
            std::string("sharding options: ") + field + " is " + std::to_string(v) +
                ", not a shardopt_switch (SHARDOPT_AUTO, SHARDOPT_ENABLE or SHARDOPT_DISABLE)");
    return v == SHARDOPT_AUTO ? automatic : v == SHARDOPT_ENABLE;
}
// Zero means the default.
template <typename T> T or_default(T value, T default_value) { return value == 0 ? default_value : value; }

// A field present in the caller's struct must have its bit set or be zero; a bit must name a
// field that is present.
void check_field(const shardopt_optimizer_options &c, std::size_t size, std::uint64_t bit, const char *bit_name,
                 const char *field, std::size_t end, bool is_zero) {
    if (end > size) {
        require(!(c.field_mask & bit), ErrorCode::invalid_argument,
                std::string("optimizer options: field_mask has ") + bit_name + " but struct_size " +
                    std::to_string(size) + " ends before field " + field);
        return;
    }
    require((c.field_mask & bit) || is_zero, ErrorCode::invalid_argument,
            std::string("optimizer options: ") + field + " is set but " + bit_name +
                " is not in field_mask (set the bit, or fill the struct with shardopt_optimizer_options_init)");
}

} // namespace

OptimizerOptions optimizer_options_from(const shardopt_optimizer_options *user) {
    const auto c = read_struct(user, "optimizer options", kMinOptimizerOptions);
    const std::size_t size = c.struct_size;
    require((c.field_mask & ~kKnownFields) == 0, ErrorCode::invalid_argument,
            "optimizer options: field_mask has bits this library does not know (" +
                std::to_string(c.field_mask & ~kKnownFields) + "; only SHARDOPT_OPT_FIELD_* bits)");
    check_field(c, size, SHARDOPT_OPT_FIELD_KIND, "SHARDOPT_OPT_FIELD_KIND", "kind", SHARDOPT_FIELD_END(kind),
                c.kind == 0);
#define SHARDOPT_FIELD_CHECK(BIT, name)                                                                         \
    check_field(c, size, SHARDOPT_OPT_FIELD_##BIT, "SHARDOPT_OPT_FIELD_" #BIT, #name, SHARDOPT_FIELD_END(name),  \
                c.name == 0);
    SHARDOPT_OPTIMIZER_FIELDS(SHARDOPT_FIELD_CHECK)
#undef SHARDOPT_FIELD_CHECK
    // Fields whose bit is clear take torch.optim's defaults for the kind (SGD without its bit).
    OptimizerOptions o =
        OptimizerOptions::defaults(c.field_mask & SHARDOPT_OPT_FIELD_KIND ? kind_arg(c.kind) : OptimizerKind::sgd);
#define SHARDOPT_FIELD_FROM_C(BIT, name)                                                                        \
    if (c.field_mask & SHARDOPT_OPT_FIELD_##BIT) o.name = static_cast<decltype(o.name)>(c.name);
    SHARDOPT_OPTIMIZER_FIELDS(SHARDOPT_FIELD_FROM_C)
#undef SHARDOPT_FIELD_FROM_C
    o.validate();
    return o;
}

ShardingOptions sharding_options_from(const shardopt_sharding_options *user) {
    const auto c = read_struct(user, "sharding options", kMinShardingOptions);
    const ShardingOptions d; // the defaults that 0 stands for
    ShardingOptions o;
    o.strategy = strategy_arg(c.strategy, "strategy");
    o.gradient_accumulation_steps = or_default(c.gradient_accumulation_steps, d.gradient_accumulation_steps);
    o.max_grad_norm = c.max_grad_norm;
    o.skip_nonfinite = switch_arg(c.skip_nonfinite, d.skip_nonfinite, "skip_nonfinite");
    o.staging_buffers = or_default(c.staging_buffers, d.staging_buffers);
    o.fsdp_prefetch = switch_arg(c.fsdp_prefetch, d.fsdp_prefetch, "fsdp_prefetch");
    o.pipeline_parallel_size = or_default(c.pipeline_parallel_size, d.pipeline_parallel_size);
    o.tensor_parallel_size = or_default(c.tensor_parallel_size, d.tensor_parallel_size);
    o.data_parallel_size = or_default(c.data_parallel_size, d.data_parallel_size);
    o.hybrid_data_strategy = strategy_arg(c.hybrid_data_strategy, "hybrid_data_strategy");
    o.hsdp_replicas = or_default(c.hsdp_replicas, d.hsdp_replicas);
    o.local_sgd_period = or_default(c.local_sgd_period, d.local_sgd_period);
    o.memory = memory_arg(c.memory);
    o.cuda_stream = static_cast<CUstream_st *>(c.cuda_stream);
    o.update_threads = c.update_threads; // 0 = automatic, as in C++
    o.overlap_param_gather = switch_arg(c.overlap_param_gather, d.overlap_param_gather, "overlap_param_gather");
    o.broadcast_initial = switch_arg(c.broadcast_initial, d.broadcast_initial, "broadcast_initial");
    const CompressionOptions dc;
    require(c.compression >= 0 && c.compression <= SHARDOPT_COMPRESSION_POWER_SGD, ErrorCode::invalid_argument,
            "sharding options: compression is " + std::to_string(int(c.compression)) + ", not a shardopt_compression");
    o.compression.method = GradientCompression(c.compression);
    o.compression.ratio = or_default(c.compression_ratio, dc.ratio);
    o.compression.block_size = or_default(c.compression_block_size, dc.block_size);
    o.compression.power_sgd_rank = or_default(c.power_sgd_rank, dc.power_sgd_rank);
    o.compression.power_sgd_min_elements =
        or_default(std::size_t(c.power_sgd_min_elements), dc.power_sgd_min_elements);
    o.compression.error_feedback = switch_arg(c.error_feedback, dc.error_feedback, "error_feedback");
    o.cpu_offload_optimizer = switch_arg(c.cpu_offload_optimizer, d.cpu_offload_optimizer, "cpu_offload_optimizer");
    o.cpu_offload_gradients = switch_arg(c.cpu_offload_gradients, d.cpu_offload_gradients, "cpu_offload_gradients");
    o.cpu_offload_params = switch_arg(c.cpu_offload_params, d.cpu_offload_params, "cpu_offload_params");
    o.async_staleness = c.async_staleness; // 0 is the default: synchronous
    require(c.parameter_group_size >= 0, ErrorCode::invalid_argument,
            "sharding options: parameter_group_size must be >= 0 (0 = the parameter set's buckets)");
    o.parameter_group_size = std::size_t(c.parameter_group_size);
    o.learning_rate = c.learning_rate;
    o.auto_sync_gradients = switch_arg(c.auto_sync_gradients, d.auto_sync_gradients, "auto_sync_gradients");
    return o;
}

TrainingOptions training_options_from(const shardopt_training_options *user,
                                      std::function<void(int rc)> on_callback_failure, bool require_samples) {
    not_null(user, "training options");
    const std::size_t size = user->struct_size;
    require(size >= kMinTrainingOptions, ErrorCode::invalid_argument,
            "training options: struct_size " + std::to_string(size) +
                " is too small (initialize it with shardopt_training_options_init)");
    require(size <= sizeof(shardopt_training_options), ErrorCode::unsupported,
            "training options: struct_size " + std::to_string(size) + " is larger than this library's " +
                std::to_string(sizeof(shardopt_training_options)) + " (built against a newer shardopt.h?)");
    shardopt_training_options c = training_defaults(); // fields beyond the caller's struct: defaults
    std::memcpy(static_cast<void *>(&c), user, size);
    TrainingOptions o;
    o.num_samples = c.num_samples;
    o.num_validation_samples = c.num_validation_samples;
    o.num_test_samples = c.num_test_samples;
    o.batch_size = c.batch_size;
    o.max_epochs = c.max_epochs;
    o.max_steps = c.max_steps;
    o.shuffle = flag_arg(c.shuffle, "shuffle");
    o.seed = c.seed;
    o.early_stopping = flag_arg(c.early_stopping, "early_stopping");
    o.patience = c.patience;
    o.tolerance = c.tolerance;
    require(c.lr_schedule >= SHARDOPT_LR_CONSTANT && c.lr_schedule <= SHARDOPT_LR_CUSTOM, ErrorCode::invalid_argument,
            "training options: lr_schedule is " + std::to_string(int(c.lr_schedule)) + ", not a shardopt_lr_schedule");
    o.schedule.kind = LrScheduleKind(int(c.lr_schedule));
    o.schedule.per_step = flag_arg(c.lr_per_step, "lr_per_step");
    o.schedule.warmup = c.warmup;
    o.schedule.decay_period = c.decay_period;
    o.schedule.min_lr = c.min_lr;
    o.schedule.gamma = c.gamma;
    if (c.lr_fn) {
        const shardopt_lr_fn fn = c.lr_fn;
        void *user_data = c.lr_user_data;
        o.schedule.custom = [fn, user_data, on_callback_failure](std::int64_t t, double base) {
            double lr = 0.0;
            shardopt_model_error(nullptr);
            const int rc = fn(user_data, t, base, &lr);
            if (rc != 0) on_callback_failure(rc);
            return lr;
        };
    }
    o.evaluate_best = flag_arg(c.evaluate_best, "evaluate_best");
    o.device_batches = flag_arg(c.device_batches, "device_batches");
    o.validate(require_samples);
    return o;
}

OptimizeOptions optimize_options_from(const shardopt_optimize_options *user) {
    const auto c = read_struct(user, "optimize options", kMinOptimizeOptions);
    const OptimizeOptions d;
    OptimizeOptions o;
    o.num_samples = c.num_samples; // no default: 0 is refused by optimize
    o.batch_size = c.batch_size;
    o.epochs = or_default(c.epochs, d.epochs);
    o.max_iterations = c.max_iterations;
    o.patience = c.patience;
    o.min_delta = c.min_delta;
    o.shuffle = switch_arg(c.shuffle, d.shuffle, "shuffle");
    o.seed = c.seed;
    o.first_epoch = c.first_epoch;
    return o;
}

} // namespace shardopt::capi

extern "C" {

SHARDOPT_API shardopt_status shardopt_optimizer_options_init_sized(shardopt_optimizer_options *opts,
                                                                   size_t struct_size, shardopt_optimizer_kind kind) {
    return guard(__func__, [&] {
        const auto full = to_c(OptimizerOptions::defaults(kind_arg(kind)), struct_size);
        write_prefix(opts, struct_size, full, kMinOptimizerOptions, "optimizer options");
    });
}

SHARDOPT_API shardopt_status shardopt_sharding_options_init_sized(shardopt_sharding_options *opts,
                                                                  size_t struct_size) {
    return guard(__func__,
                 [&] { write_prefix(opts, struct_size, sharding_defaults(), kMinShardingOptions, "sharding options"); });
}

SHARDOPT_API shardopt_status shardopt_optimizer_options_init_preset(shardopt_optimizer_options *opts,
                                                                    size_t struct_size,
                                                                    shardopt_optimizer_preset preset) {
    return guard(__func__, [&] {
        const auto full = to_c(optimizer_preset(int(preset)), struct_size);
        write_prefix(opts, struct_size, full, kMinOptimizerOptions, "optimizer options");
    });
}

SHARDOPT_API shardopt_status shardopt_optimizer_options_validate(const shardopt_optimizer_options *opts) {
    return guard(__func__, [&] { (void)optimizer_options_from(opts); });
}

SHARDOPT_API shardopt_status shardopt_sharding_options_init_preset(shardopt_sharding_options *opts,
                                                                   size_t struct_size, shardopt_sharding_preset preset) {
    return guard(__func__, [&] {
        write_prefix(opts, struct_size, sharding_preset(int(preset)), kMinShardingOptions, "sharding options");
    });
}

SHARDOPT_API shardopt_status shardopt_sharding_options_validate(const shardopt_sharding_options *opts) {
    return guard(__func__, [&] { validate_sharding_fields(sharding_options_from(opts)); });
}

SHARDOPT_API shardopt_status shardopt_sharding_options_validate_strict(const shardopt_sharding_options *opts) {
    return guard(__func__, [&] {
        validate_sharding_fields(sharding_options_from(opts));
        require_sharding_values(read_struct(opts, "sharding options", kMinShardingOptions));
    });
}

SHARDOPT_API shardopt_status shardopt_training_options_init_sized(shardopt_training_options *opts,
                                                                  size_t struct_size) {
    return guard(__func__,
                 [&] { write_prefix(opts, struct_size, training_defaults(), kMinTrainingOptions, "training options"); });
}

SHARDOPT_API shardopt_status shardopt_training_options_validate(const shardopt_training_options *opts) {
    return guard(__func__, [&] {
        (void)training_options_from(opts, [](int) {}, /*require_samples=*/false);
    });
}

SHARDOPT_API shardopt_status shardopt_training_learning_rate(const shardopt_training_options *opts, int64_t t,
                                                             double base, double *lr) {
    return guard(__func__, [&] {
        not_null(lr, "lr");
        TrainingOptions o = training_options_from(opts, [](int rc) {
            std::string why = "the learning-rate callback returned " + std::to_string(rc);
            const std::string reason = take_model_error();
            if (!reason.empty()) why += ": " + reason;
            throw Error(ErrorCode::invalid_state, why);
        });
        require(std::isfinite(base) && base >= 0, ErrorCode::invalid_argument, "base must be finite and >= 0");
        const std::int64_t batches = (o.num_samples + o.effective_batch() - 1) / o.effective_batch();
        std::int64_t span = o.schedule.per_step ? batches * o.max_epochs : o.max_epochs;
        if (o.schedule.per_step && o.max_steps > 0) span = std::min(span, o.max_steps);
        *lr = o.schedule.rate(t, base, span);
    });
}

SHARDOPT_API shardopt_status shardopt_optimize_options_init_sized(shardopt_optimize_options *opts,
                                                                  size_t struct_size) {
    return guard(__func__,
                 [&] { write_prefix(opts, struct_size, optimize_defaults(), kMinOptimizeOptions, "optimize options"); });
}

} // extern "C"

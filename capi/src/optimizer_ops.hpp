// The bodies of the optimizer functions of the C ABI, shared by shardopt_optimizer_*
// (ShardedOptimizer) and shardopt_device_optimizer_* (cuda::ShardedDeviceOptimizer). Both classes
// have the same layout, step protocol, state, optimize and checkpoint members, so each C
// function is its handle check plus one of these, and the two handles check their arguments,
// fill their outputs and word their errors alike.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "capi_internal.hpp"
#include "options_convert.hpp"

namespace shardopt::capi::ops {

// What every create checks before anything is built: the handles, `out` and the options
// (converted and validated; messages name the bad field).
struct CreateArgs {
    Communicator &comm;
    const ParameterSet &layout;
    OptimizerOptions optimizer;
    ShardingOptions sharding;
};
inline CreateArgs create_args(shardopt_comm comm, shardopt_params params, const shardopt_optimizer_options *optimizer,
                              const shardopt_sharding_options *sharding, const void *out) {
    Communicator &c = comm_of(comm);
    const ParameterSet &set = params_of(params);
    not_null(out, "out");
    CreateArgs args{c, set, optimizer_options_from(optimizer), sharding_options_from(sharding)};
    require(set.tensor_count() > 0, ErrorCode::invalid_argument, "the parameter set has no tensors");
    return args;
}

// Index and size arguments against the optimizer's layout.
inline void bucket_arg(const ParameterSet &l, int b) {
    require(b >= 0 && b < l.bucket_count(), ErrorCode::invalid_argument,
            "bucket " + std::to_string(b) + " out of range [0, " + std::to_string(l.bucket_count()) + ")");
}
inline void tensor_arg(const ParameterSet &l, int t) {
    require(t >= 0 && t < l.tensor_count(), ErrorCode::invalid_argument,
            "tensor " + std::to_string(t) + " out of range [0, " + std::to_string(l.tensor_count()) + ")");
}
inline void packed_count_arg(const ParameterSet &l, size_t count) {
    require(count == l.element_count(), ErrorCode::invalid_argument,
            "count is " + std::to_string(count) + " but the model has " + std::to_string(l.element_count()) +
                " parameters");
}

// --- layout queries ---------------------------------------------------------------------------
template <typename O> void tensor_count(O &o, int *count) {
    not_null(count, "count");
    *count = o.layout().tensor_count();
}
template <typename O> void tensor_info(O &o, int tensor, size_t *count, int *bucket) {
    tensor_arg(o.layout(), tensor);
    const auto &t = o.layout().tensor(tensor);
    if (count) *count = t.count;
    if (bucket) *bucket = t.bucket;
}
template <typename O> void bucket_count(O &o, int *count) {
    not_null(count, "count");
    *count = o.layout().bucket_count();
}
template <typename O> void bucket_info(O &o, int bucket, size_t *count) {
    bucket_arg(o.layout(), bucket);
    not_null(count, "count");
    *count = o.layout().bucket(bucket).count;
}
template <typename O> void element_count(O &o, size_t *count, size_t *padded_count) {
    if (count) *count = o.layout().element_count();
    if (padded_count) *padded_count = o.layout().padded_count();
}
template <typename O> void step_count(O &o, int64_t *steps) {
    not_null(steps, "steps");
    *steps = o.step_count();
}

// --- parameters -------------------------------------------------------------------------------
template <typename O> void parameters(O &o, void **params) {
    not_null(params, "params");
    *params = o.parameters();
}
template <typename O> void tensor_parameters(O &o, int tensor, void **params) {
    tensor_arg(o.layout(), tensor);
    not_null(params, "params");
    *params = o.tensor_parameters(tensor);
}
template <typename O> void get_parameters(O &o, void *packed, size_t count) {
    not_null(packed, "packed");
    packed_count_arg(o.layout(), count);
    o.get_parameters(packed);
}
template <typename O> void set_parameters(O &o, const void *packed, size_t count) {
    not_null(packed, "packed");
    packed_count_arg(o.layout(), count);
    o.set_parameters(packed);
}
template <typename O> void gather(O &o, int bucket, void **params) {
    bucket_arg(o.layout(), bucket);
    void *p = o.gather(bucket);
    if (params) *params = p;
}
template <typename O> void release(O &o, int bucket) {
    bucket_arg(o.layout(), bucket);
    o.release(bucket);
}

// --- step protocol ----------------------------------------------------------------------------
template <typename O> void bucket_grad(O &o, int bucket, void **grad, size_t *count) {
    bucket_arg(o.layout(), bucket);
    not_null(grad, "grad");
    *grad = o.bucket_grad(bucket);
    if (count) *count = o.layout().bucket(bucket).count;
}
template <typename O> void tensor_grad(O &o, int tensor, void **grad, size_t *count) {
    tensor_arg(o.layout(), tensor);
    not_null(grad, "grad");
    *grad = o.grad(tensor);
    if (count) *count = o.layout().tensor(tensor).count;
}
template <typename O> void grad_ready(O &o, int bucket) {
    bucket_arg(o.layout(), bucket);
    o.grad_ready(bucket);
}
template <typename O> void step(O &o, shardopt_step_result *result) {
    if (result) check_out_struct(result, "step result"); // before stepping: outputs unchanged on error
    const StepResult r = o.step();
    if (!result) return;
    shardopt_step_result c{};
    c.applied = r.applied;
    c.skipped_nonfinite = r.skipped_nonfinite;
    c.accumulating = r.accumulating;
    c.grad_norm = r.grad_norm;
    write_struct(result, c, "step result");
}

// --- state ------------------------------------------------------------------------------------
template <typename O> void should_early_stop(O &o, int vote, int *stop) {
    not_null(stop, "stop");
    *stop = o.should_early_stop(vote != 0) ? 1 : 0;
}
template <typename O> void memory_stats(O &o, shardopt_memory_stats *stats) {
    not_null(stats, "stats");
    check_out_struct(stats, "memory stats");
    const MemoryStats m = o.memory_stats();
    shardopt_memory_stats c{};
    c.params_bytes = m.params_bytes;
    c.grads_bytes = m.grads_bytes;
    c.optimizer_state_bytes = m.optimizer_state_bytes;
    c.buffer_bytes = m.buffer_bytes;
    c.peak_buffer_bytes = m.peak_buffer_bytes;
    c.total_bytes = m.total();
    write_struct(stats, c, "memory stats");
}

// --- optimize(): the training loop with a C model callback -------------------------------------
// `world` is the communicator the optimizer was created over: a failing callback aborts it so
// the peers stop too.
template <typename O>
void optimize(O &o, Communicator &world, shardopt_model_fn model, void *user_data,
              const shardopt_optimize_options *options, shardopt_optimize_result *result) {
    require(model != nullptr, ErrorCode::invalid_argument, "model is NULL");
    const OptimizeOptions oo = optimize_options_from(options);
    shardopt_optimize_result out{};
    if (result) {
        check_out_struct(result, "optimize result");
        const std::size_t have = std::min(result->struct_size, sizeof out);
        std::memcpy(static_cast<void *>(&out), result, have);
        require(out.best_parameters_count == 0 || out.best_parameters_count == o.layout().element_count(),
                ErrorCode::invalid_argument,
                "best_parameters_count is " + std::to_string(out.best_parameters_count) + " but the model has " +
                    std::to_string(o.layout().element_count()) + " parameters");
        require(out.best_parameters == nullptr || out.best_parameters_count != 0, ErrorCode::invalid_argument,
                "best_parameters is set but best_parameters_count is 0");
    }
    ModelFunction fn = [&](const void *params, void *grad, const std::int64_t *samples, std::size_t n) {
        double loss = 0.0;
        const int rc = model(user_data, params, grad, samples, n, &loss);
        if (rc != 0) {
            const std::string why = "model callback returned " + std::to_string(rc);
            world.abort(why, ErrorCode::invalid_state);
            throw Error(ErrorCode::invalid_state, why);
        }
        return loss;
    };
    const OptimizeResult r = o.optimize(fn, oo);
    if (!result) return;
    if (out.best_parameters && !r.best_parameters.empty())
        std::memcpy(out.best_parameters, r.best_parameters.data(), r.best_parameters.size());
    if (out.loss_history)
        std::copy_n(r.loss_history.begin(), std::min(r.loss_history.size(), out.loss_history_capacity),
                    out.loss_history);
    out.loss_history_count = r.loss_history.size();
    out.best_loss = r.best_loss;
    out.iterations = r.iterations;
    out.stopped_early = r.stopped_early;
    write_struct(result, out, "optimize result");
}

// --- checkpoints ------------------------------------------------------------------------------
template <typename O> void save(O &o, const char *dir, shardopt_checkpoint_form form) {
    not_null(dir, "dir");
    require(form == SHARDOPT_CHECKPOINT_SHARDED || form == SHARDOPT_CHECKPOINT_CONSOLIDATED,
            ErrorCode::invalid_argument, "form " + std::to_string(int(form)) + " is not a shardopt_checkpoint_form");
    o.save(dir, form == SHARDOPT_CHECKPOINT_SHARDED ? CheckpointForm::sharded : CheckpointForm::consolidated);
}
template <typename O> void load(O &o, const char *dir) {
    not_null(dir, "dir");
    o.load(dir);
}
// The bytes in a malloc'ed buffer (shardopt_buffer_free releases it).
template <typename O> void serialize(O &o, void **data, size_t *size) {
    not_null(data, "data");
    not_null(size, "size");
    const std::vector<unsigned char> bytes = o.serialize();
    void *out = std::malloc(bytes.empty() ? 1 : bytes.size());
    if (!out) throw std::bad_alloc();
    if (!bytes.empty()) std::memcpy(out, bytes.data(), bytes.size());
    *data = out;
    *size = bytes.size();
}
template <typename O> void deserialize(O &o, const void *data, size_t size) {
    not_null(data, "data");
    o.deserialize(data, size);
}

} // namespace shardopt::capi::ops

// Sharded optimizers, in host or CUDA memory: creation, layout queries, parameters, the step
// protocol and state.
#include "capi_internal.hpp"
#include "shardopt/gpu_comm.hpp"
#include "options_convert.hpp"

using namespace shardopt;
using namespace shardopt::capi;

namespace {

// Index and size arguments against the optimizer's layout.
void bucket_arg(const ParameterSet &l, int b) {
    require(b >= 0 && b < l.bucket_count(), ErrorCode::invalid_argument,
            "bucket " + std::to_string(b) + " out of range [0, " + std::to_string(l.bucket_count()) + ")");
}
void tensor_arg(const ParameterSet &l, int t) {
    require(t >= 0 && t < l.tensor_count(), ErrorCode::invalid_argument,
            "tensor " + std::to_string(t) + " out of range [0, " + std::to_string(l.tensor_count()) + ")");
}
void packed_count_arg(const ParameterSet &l, size_t count) {
    require(count == l.element_count(), ErrorCode::invalid_argument,
            "count is " + std::to_string(count) + " but the model has " + std::to_string(l.element_count()) +
                " parameters");
}

shardopt_status create(const char *fn, shardopt_comm comm, shardopt_params params,
                       const shardopt_optimizer_options *optimizer, const shardopt_sharding_options *sharding,
                       const void *initial, void *external, size_t external_count, bool use_external,
                       shardopt_optimizer *out) {
    return guard(fn, [&] {
        Communicator &c = comm_of(comm);
        const ParameterSet &layout = params_of(params);
        not_null(out, "out");
        const OptimizerOptions o = optimizer_options_from(optimizer);
        const ShardingOptions s = sharding_options_from(sharding);
        require(layout.tensor_count() > 0, ErrorCode::invalid_argument, "the parameter set has no tensors");
        if (use_external) {
            not_null(external, "param_buffer");
            require(s.strategy != Strategy::fsdp && s.strategy != Strategy::hybrid && s.strategy != Strategy::async_sgd,
                    ErrorCode::unsupported,
                    std::string("caller-owned parameters are not supported for ") + strategy_name(s.strategy) +
                        " (DDP, ZeRO-1, ZeRO-2 and Local SGD only)");
            ParameterSet planned = bucketed_layout(layout, s);
            planned.plan(c.size());
            require(external_count == planned.padded_count(), ErrorCode::invalid_argument,
                    "param_count is " + std::to_string(external_count) + " but the layout needs " +
                        std::to_string(planned.padded_count()) + " elements (shardopt_params_padded_count)");
        }
        std::unique_ptr<shardopt_optimizer_s> h(new shardopt_optimizer_s);
        h->options_lr = o.lr;
        h->opt = ShardedOptimizer::create(c.shared_from_this(), layout, o, s, initial,
                                          use_external ? external : nullptr);
        *out = h.release();
    });
}

} // namespace

extern "C" {

SHARDOPT_API shardopt_status shardopt_optimizer_create(shardopt_comm comm, shardopt_params params,
                                                       const shardopt_optimizer_options *optimizer,
                                                       const shardopt_sharding_options *sharding,
                                                       const void *initial, shardopt_optimizer *out) {
    return create(__func__, comm, params, optimizer, sharding, initial, nullptr, 0, false, out);
}

SHARDOPT_API shardopt_status shardopt_optimizer_create_external(shardopt_comm comm, shardopt_params params,
                                                                const shardopt_optimizer_options *optimizer,
                                                                const shardopt_sharding_options *sharding,
                                                                const void *initial, void *param_buffer,
                                                                size_t param_count, shardopt_optimizer *out) {
    return create(__func__, comm, params, optimizer, sharding, initial, param_buffer, param_count, true, out);
}

SHARDOPT_API shardopt_status shardopt_optimizer_destroy(shardopt_optimizer opt) {
    return guard(__func__, [&] {
        if (opt) opt_of(opt); // refused inside its own optimize()
        destroy(opt, HandleTag::optimizer, "optimizer");
    });
}

// --- layout queries ---------------------------------------------------------------------------

SHARDOPT_API shardopt_status shardopt_optimizer_tensor_count(shardopt_optimizer opt, int *count) {
    return guard(__func__, [&] {
        ShardedOptimizer &o = opt_query_of(opt);
        not_null(count, "count");
        *count = o.layout().tensor_count();
    });
}

SHARDOPT_API shardopt_status shardopt_optimizer_tensor_info(shardopt_optimizer opt, int tensor, size_t *count,
                                                            int *bucket) {
    return guard(__func__, [&] {
        ShardedOptimizer &o = opt_query_of(opt);
        tensor_arg(o.layout(), tensor);
        const auto &t = o.layout().tensor(tensor);
        if (count) *count = t.count;
        if (bucket) *bucket = t.bucket;
    });
}

SHARDOPT_API shardopt_status shardopt_optimizer_bucket_count(shardopt_optimizer opt, int *count) {
    return guard(__func__, [&] {
        ShardedOptimizer &o = opt_query_of(opt);
        not_null(count, "count");
        *count = o.layout().bucket_count();
    });
}

SHARDOPT_API shardopt_status shardopt_optimizer_bucket_info(shardopt_optimizer opt, int bucket, size_t *count) {
    return guard(__func__, [&] {
        ShardedOptimizer &o = opt_query_of(opt);
        bucket_arg(o.layout(), bucket);
        not_null(count, "count");
        *count = o.layout().bucket(bucket).count;
    });
}

SHARDOPT_API shardopt_status shardopt_optimizer_element_count(shardopt_optimizer opt, size_t *count,
                                                              size_t *padded_count) {
    return guard(__func__, [&] {
        ShardedOptimizer &o = opt_query_of(opt);
        if (count) *count = o.layout().element_count();
        if (padded_count) *padded_count = o.layout().padded_count();
    });
}

SHARDOPT_API shardopt_status shardopt_optimizer_set_learning_rate(shardopt_optimizer opt, double lr) {
    return guard(__func__, [&] { opt_query_of(opt).set_learning_rate(lr); });
}

SHARDOPT_API shardopt_status shardopt_optimizer_learning_rate(shardopt_optimizer opt, double *lr) {
    return guard(__func__, [&] {
        ShardedOptimizer &o = opt_query_of(opt);
        not_null(lr, "lr");
        *lr = o.optimizer_options().lr;
    });
}

SHARDOPT_API shardopt_status shardopt_optimizer_follow_options(shardopt_optimizer opt,
                                                               const shardopt_optimizer_options *options) {
    return guard(__func__, [&] {
        ShardedOptimizer &o = opt_query_of(opt);
        const double lr = optimizer_options_from(options).lr;
        if (lr == opt->options_lr) return;
        o.set_learning_rate(lr);
        opt->options_lr = lr;
    });
}

SHARDOPT_API shardopt_status shardopt_optimizer_step_count(shardopt_optimizer opt, int64_t *steps) {
    return guard(__func__, [&] {
        ShardedOptimizer &o = opt_query_of(opt);
        not_null(steps, "steps");
        *steps = o.step_count();
    });
}

// --- parameters (memory of the optimizer's space; packed copies in host memory) --------------

SHARDOPT_API shardopt_status shardopt_optimizer_parameters(shardopt_optimizer opt, void **params) {
    return guard(__func__, [&] {
        ShardedOptimizer &o = opt_of(opt);
        not_null(params, "params");
        *params = o.parameters();
    });
}

SHARDOPT_API shardopt_status shardopt_optimizer_tensor_parameters(shardopt_optimizer opt, int tensor, void **params) {
    return guard(__func__, [&] {
        ShardedOptimizer &o = opt_of(opt, /*stage_may_call=*/true);
        tensor_arg(o.layout(), tensor);
        not_null(params, "params");
        *params = o.tensor_parameters(tensor);
    });
}

SHARDOPT_API shardopt_status shardopt_optimizer_get_parameters(shardopt_optimizer opt, void *packed, size_t count) {
    return guard(__func__, [&] {
        ShardedOptimizer &o = opt_of(opt);
        not_null(packed, "packed");
        packed_count_arg(o.layout(), count);
        o.get_parameters(packed);
    });
}

SHARDOPT_API shardopt_status shardopt_optimizer_set_parameters(shardopt_optimizer opt, const void *packed,
                                                               size_t count) {
    return guard(__func__, [&] {
        ShardedOptimizer &o = opt_of(opt);
        not_null(packed, "packed");
        packed_count_arg(o.layout(), count);
        o.set_parameters(packed);
    });
}

SHARDOPT_API shardopt_status shardopt_optimizer_check_array(shardopt_optimizer opt, const char *what,
                                                            shardopt_dtype dtype, size_t count) {
    return guard(__func__, [&] {
        const ParameterSet &l = opt_query_of(opt).layout();
        array_arg(l, what, dtype, count, l.element_count());
    });
}

SHARDOPT_API shardopt_status shardopt_optimizer_gather(shardopt_optimizer opt, int bucket, void **params) {
    return guard(__func__, [&] {
        ShardedOptimizer &o = opt_of(opt);
        bucket_arg(o.layout(), bucket);
        void *p = o.gather(bucket);
        if (params) *params = p;
    });
}

SHARDOPT_API shardopt_status shardopt_optimizer_release(shardopt_optimizer opt, int bucket) {
    return guard(__func__, [&] {
        ShardedOptimizer &o = opt_of(opt);
        bucket_arg(o.layout(), bucket);
        o.release(bucket);
    });
}

// --- step protocol ----------------------------------------------------------------------------

SHARDOPT_API shardopt_status shardopt_optimizer_zero_grad(shardopt_optimizer opt) {
    return guard(__func__, [&] { opt_of(opt).zero_grad(); });
}

SHARDOPT_API shardopt_status shardopt_optimizer_bucket_grad(shardopt_optimizer opt, int bucket, void **grad,
                                                            size_t *count) {
    return guard(__func__, [&] {
        ShardedOptimizer &o = opt_of(opt);
        bucket_arg(o.layout(), bucket);
        not_null(grad, "grad");
        *grad = o.bucket_grad(bucket);
        if (count) *count = o.layout().bucket(bucket).count;
    });
}

SHARDOPT_API shardopt_status shardopt_optimizer_tensor_grad(shardopt_optimizer opt, int tensor, void **grad,
                                                            size_t *count) {
    return guard(__func__, [&] {
        ShardedOptimizer &o = opt_of(opt);
        tensor_arg(o.layout(), tensor);
        not_null(grad, "grad");
        *grad = o.grad(tensor);
        if (count) *count = o.layout().tensor(tensor).count;
    });
}

SHARDOPT_API shardopt_status shardopt_optimizer_grad_ready(shardopt_optimizer opt, int bucket) {
    return guard(__func__, [&] {
        ShardedOptimizer &o = opt_of(opt);
        bucket_arg(o.layout(), bucket);
        o.grad_ready(bucket);
    });
}

SHARDOPT_API shardopt_status shardopt_optimizer_step(shardopt_optimizer opt, shardopt_step_result *result) {
    return guard(__func__, [&] {
        ShardedOptimizer &o = opt_of(opt);
        if (result) check_out_struct(result, "step result"); // before stepping: outputs unchanged on error
        const StepResult r = opt->elastic ? opt->elastic->step() : o.step();
        if (!result) return;
        shardopt_step_result c{};
        c.applied = r.applied;
        c.skipped_nonfinite = r.skipped_nonfinite;
        c.accumulating = r.accumulating;
        c.grad_norm = r.grad_norm;
        c.reduce_wait_seconds = r.reduce_wait_seconds;
        c.update_seconds = r.update_seconds;
        c.post_update_seconds = r.post_update_seconds;
        c.bytes_sent = r.bytes_sent;
        write_struct(result, c, "step result");
    });
}

// --- state ------------------------------------------------------------------------------------

SHARDOPT_API shardopt_status shardopt_optimizer_synchronize_state(shardopt_optimizer opt) {
    return guard(__func__, [&] { opt_of(opt).synchronize_optimizer_state(); });
}

SHARDOPT_API shardopt_status shardopt_optimizer_should_early_stop(shardopt_optimizer opt, int vote, int *stop) {
    return guard(__func__, [&] {
        ShardedOptimizer &o = opt_of(opt);
        not_null(stop, "stop");
        *stop = o.should_early_stop(vote != 0) ? 1 : 0;
    });
}

SHARDOPT_API shardopt_status shardopt_optimizer_device(shardopt_optimizer opt, shardopt_memory_space *memory,
                                                       int *device, void **cuda_stream) {
    return guard(__func__, [&] {
        ShardedOptimizer &o = opt_query_of(opt);
        const bool cuda = o.options().memory == MemorySpace::cuda;
        if (memory) *memory = cuda ? SHARDOPT_MEMORY_CUDA : SHARDOPT_MEMORY_HOST;
        if (device) *device = cuda ? gpu::device_of(o.communicator()) : -1;
        if (cuda_stream) *cuda_stream = cuda ? static_cast<void *>(o.options().cuda_stream) : nullptr;
    });
}

SHARDOPT_API shardopt_status shardopt_optimizer_order_stream(shardopt_optimizer opt, void *consumer_stream) {
    return guard(__func__, [&] {
        ShardedOptimizer &o = opt_query_of(opt);
        if (o.options().memory != MemorySpace::cuda) return; // host memory: nothing is in flight on a device
        gpu::order_after(static_cast<gpu::Stream>(consumer_stream), o.options().cuda_stream);
    });
}

SHARDOPT_API shardopt_status shardopt_optimizer_memory_stats(shardopt_optimizer opt, shardopt_memory_stats *stats) {
    return guard(__func__, [&] {
        ShardedOptimizer &o = opt_query_of(opt);
        not_null(stats, "stats");
        check_out_struct(stats, "memory stats");
        write_memory_stats(stats, o.memory_stats());
    });
}

SHARDOPT_API shardopt_status shardopt_optimizer_bytes_sent(shardopt_optimizer opt, uint64_t *bytes) {
    return guard(__func__, [&] {
        ShardedOptimizer &o = opt_query_of(opt);
        not_null(bytes, "bytes");
        *bytes = o.bytes_sent();
    });
}

} // extern "C"

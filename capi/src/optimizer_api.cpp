// Sharded optimizers: creation, layout queries, parameters, the step protocol and state. The
// bodies are shared with the device optimizer (optimizer_ops.hpp).
#include "capi_internal.hpp"
#include "optimizer_ops.hpp"

using namespace shardopt;
using namespace shardopt::capi;

namespace {

shardopt_status create(const char *fn, shardopt_comm comm, shardopt_params params,
                       const shardopt_optimizer_options *optimizer, const shardopt_sharding_options *sharding,
                       const void *initial, void *external, size_t external_count, bool use_external,
                       shardopt_optimizer *out) {
    return guard(fn, [&] {
        const ops::CreateArgs a = ops::create_args(comm, params, optimizer, sharding, out);
        if (use_external) {
            not_null(external, "param_buffer");
            require(a.sharding.strategy != Strategy::fsdp && a.sharding.strategy != Strategy::hybrid,
                    ErrorCode::unsupported,
                    std::string("caller-owned parameters are not supported for ") +
                        strategy_name(a.sharding.strategy) + " (DDP, ZeRO-1, ZeRO-2 and Local SGD only)");
            ParameterSet planned = a.layout;
            planned.plan(a.comm.size());
            require(external_count == planned.padded_count(), ErrorCode::invalid_argument,
                    "param_count is " + std::to_string(external_count) + " but the layout needs " +
                        std::to_string(planned.padded_count()) + " elements (shardopt_params_padded_count)");
        }
        std::unique_ptr<shardopt_optimizer_s> h(new shardopt_optimizer_s);
        h->opt = ShardedOptimizer::create(a.comm.shared_from_this(), a.layout, a.optimizer, a.sharding, initial,
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
    return guard(__func__, [&] { destroy(opt, HandleTag::optimizer, "optimizer"); });
}

SHARDOPT_API shardopt_status shardopt_optimizer_tensor_count(shardopt_optimizer opt, int *count) {
    return guard(__func__, [&] { ops::tensor_count(opt_of(opt), count); });
}

SHARDOPT_API shardopt_status shardopt_optimizer_tensor_info(shardopt_optimizer opt, int tensor, size_t *count,
                                                            int *bucket) {
    return guard(__func__, [&] { ops::tensor_info(opt_of(opt), tensor, count, bucket); });
}

SHARDOPT_API shardopt_status shardopt_optimizer_bucket_count(shardopt_optimizer opt, int *count) {
    return guard(__func__, [&] { ops::bucket_count(opt_of(opt), count); });
}

SHARDOPT_API shardopt_status shardopt_optimizer_bucket_info(shardopt_optimizer opt, int bucket, size_t *count) {
    return guard(__func__, [&] { ops::bucket_info(opt_of(opt), bucket, count); });
}

SHARDOPT_API shardopt_status shardopt_optimizer_element_count(shardopt_optimizer opt, size_t *count,
                                                              size_t *padded_count) {
    return guard(__func__, [&] { ops::element_count(opt_of(opt), count, padded_count); });
}

SHARDOPT_API shardopt_status shardopt_optimizer_set_learning_rate(shardopt_optimizer opt, double lr) {
    return guard(__func__, [&] { opt_of(opt).set_learning_rate(lr); });
}

SHARDOPT_API shardopt_status shardopt_optimizer_step_count(shardopt_optimizer opt, int64_t *steps) {
    return guard(__func__, [&] { ops::step_count(opt_of(opt), steps); });
}

SHARDOPT_API shardopt_status shardopt_optimizer_parameters(shardopt_optimizer opt, void **params) {
    return guard(__func__, [&] { ops::parameters(opt_of(opt), params); });
}

SHARDOPT_API shardopt_status shardopt_optimizer_tensor_parameters(shardopt_optimizer opt, int tensor, void **params) {
    return guard(__func__, [&] { ops::tensor_parameters(opt_of(opt), tensor, params); });
}

SHARDOPT_API shardopt_status shardopt_optimizer_get_parameters(shardopt_optimizer opt, void *packed, size_t count) {
    return guard(__func__, [&] { ops::get_parameters(opt_of(opt), packed, count); });
}

SHARDOPT_API shardopt_status shardopt_optimizer_set_parameters(shardopt_optimizer opt, const void *packed,
                                                               size_t count) {
    return guard(__func__, [&] { ops::set_parameters(opt_of(opt), packed, count); });
}

SHARDOPT_API shardopt_status shardopt_optimizer_gather(shardopt_optimizer opt, int bucket, void **params) {
    return guard(__func__, [&] { ops::gather(opt_of(opt), bucket, params); });
}

SHARDOPT_API shardopt_status shardopt_optimizer_release(shardopt_optimizer opt, int bucket) {
    return guard(__func__, [&] { ops::release(opt_of(opt), bucket); });
}

SHARDOPT_API shardopt_status shardopt_optimizer_zero_grad(shardopt_optimizer opt) {
    return guard(__func__, [&] { opt_of(opt).zero_grad(); });
}

SHARDOPT_API shardopt_status shardopt_optimizer_bucket_grad(shardopt_optimizer opt, int bucket, void **grad,
                                                            size_t *count) {
    return guard(__func__, [&] { ops::bucket_grad(opt_of(opt), bucket, grad, count); });
}

SHARDOPT_API shardopt_status shardopt_optimizer_tensor_grad(shardopt_optimizer opt, int tensor, void **grad,
                                                            size_t *count) {
    return guard(__func__, [&] { ops::tensor_grad(opt_of(opt), tensor, grad, count); });
}

SHARDOPT_API shardopt_status shardopt_optimizer_grad_ready(shardopt_optimizer opt, int bucket) {
    return guard(__func__, [&] { ops::grad_ready(opt_of(opt), bucket); });
}

SHARDOPT_API shardopt_status shardopt_optimizer_step(shardopt_optimizer opt, shardopt_step_result *result) {
    return guard(__func__, [&] { ops::step(opt_of(opt), result); });
}

SHARDOPT_API shardopt_status shardopt_optimizer_synchronize_state(shardopt_optimizer opt) {
    return guard(__func__, [&] { opt_of(opt).synchronize_optimizer_state(); });
}

SHARDOPT_API shardopt_status shardopt_optimizer_should_early_stop(shardopt_optimizer opt, int vote, int *stop) {
    return guard(__func__, [&] { ops::should_early_stop(opt_of(opt), vote, stop); });
}

SHARDOPT_API shardopt_status shardopt_optimizer_memory_stats(shardopt_optimizer opt, shardopt_memory_stats *stats) {
    return guard(__func__, [&] { ops::memory_stats(opt_of(opt), stats); });
}

} // extern "C"

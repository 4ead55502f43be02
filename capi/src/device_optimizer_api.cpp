// Device optimizers: shardopt_device_optimizer_*, cuda::ShardedDeviceOptimizer behind the same
// functions as shardopt_optimizer_* (bodies shared in optimizer_ops.hpp). Pointers it hands out
// are CUDA device memory; host buffers go through get/set_parameters, optimize and checkpoints.
#include "capi_internal.hpp"
#include "optimizer_ops.hpp"

using namespace shardopt;
using namespace shardopt::capi;

extern "C" {

SHARDOPT_API shardopt_status shardopt_device_optimizer_create(shardopt_comm comm, shardopt_params params,
                                                              const shardopt_optimizer_options *optimizer,
                                                              const shardopt_sharding_options *sharding,
                                                              const void *initial, void *cuda_stream,
                                                              shardopt_device_optimizer *out) {
    return guard(__func__, [&] {
        const ops::CreateArgs a = ops::create_args(comm, params, optimizer, sharding, out);
        std::unique_ptr<shardopt_device_optimizer_s> h(new shardopt_device_optimizer_s);
        h->comm = a.comm.shared_from_this();
        h->opt = cuda::ShardedDeviceOptimizer::create(h->comm, a.layout, a.optimizer, a.sharding, initial,
                                                      static_cast<cuda::Stream>(cuda_stream));
        *out = h.release();
    });
}

SHARDOPT_API shardopt_status shardopt_device_optimizer_destroy(shardopt_device_optimizer opt) {
    return guard(__func__, [&] { destroy(opt, HandleTag::device_optimizer, "device optimizer"); });
}

SHARDOPT_API shardopt_status shardopt_device_optimizer_tensor_count(shardopt_device_optimizer opt, int *count) {
    return guard(__func__, [&] { ops::tensor_count(device_opt_of(opt), count); });
}

SHARDOPT_API shardopt_status shardopt_device_optimizer_tensor_info(shardopt_device_optimizer opt, int tensor,
                                                                   size_t *count, int *bucket) {
    return guard(__func__, [&] { ops::tensor_info(device_opt_of(opt), tensor, count, bucket); });
}

SHARDOPT_API shardopt_status shardopt_device_optimizer_bucket_count(shardopt_device_optimizer opt, int *count) {
    return guard(__func__, [&] { ops::bucket_count(device_opt_of(opt), count); });
}

SHARDOPT_API shardopt_status shardopt_device_optimizer_bucket_info(shardopt_device_optimizer opt, int bucket,
                                                                   size_t *count) {
    return guard(__func__, [&] { ops::bucket_info(device_opt_of(opt), bucket, count); });
}

SHARDOPT_API shardopt_status shardopt_device_optimizer_element_count(shardopt_device_optimizer opt, size_t *count,
                                                                     size_t *padded_count) {
    return guard(__func__, [&] { ops::element_count(device_opt_of(opt), count, padded_count); });
}

SHARDOPT_API shardopt_status shardopt_device_optimizer_set_learning_rate(shardopt_device_optimizer opt, double lr) {
    return guard(__func__, [&] { device_opt_of(opt).set_learning_rate(lr); });
}

SHARDOPT_API shardopt_status shardopt_device_optimizer_step_count(shardopt_device_optimizer opt, int64_t *steps) {
    return guard(__func__, [&] { ops::step_count(device_opt_of(opt), steps); });
}

SHARDOPT_API shardopt_status shardopt_device_optimizer_parameters(shardopt_device_optimizer opt, void **params) {
    return guard(__func__, [&] { ops::parameters(device_opt_of(opt), params); });
}

SHARDOPT_API shardopt_status shardopt_device_optimizer_tensor_parameters(shardopt_device_optimizer opt, int tensor,
                                                                         void **params) {
    return guard(__func__, [&] { ops::tensor_parameters(device_opt_of(opt), tensor, params); });
}

SHARDOPT_API shardopt_status shardopt_device_optimizer_get_parameters(shardopt_device_optimizer opt, void *packed,
                                                                      size_t count) {
    return guard(__func__, [&] { ops::get_parameters(device_opt_of(opt), packed, count); });
}

SHARDOPT_API shardopt_status shardopt_device_optimizer_set_parameters(shardopt_device_optimizer opt,
                                                                      const void *packed, size_t count) {
    return guard(__func__, [&] { ops::set_parameters(device_opt_of(opt), packed, count); });
}

SHARDOPT_API shardopt_status shardopt_device_optimizer_gather(shardopt_device_optimizer opt, int bucket,
                                                              void **params) {
    return guard(__func__, [&] { ops::gather(device_opt_of(opt), bucket, params); });
}

SHARDOPT_API shardopt_status shardopt_device_optimizer_release(shardopt_device_optimizer opt, int bucket) {
    return guard(__func__, [&] { ops::release(device_opt_of(opt), bucket); });
}

SHARDOPT_API shardopt_status shardopt_device_optimizer_zero_grad(shardopt_device_optimizer opt) {
    return guard(__func__, [&] { device_opt_of(opt).zero_grad(); });
}

SHARDOPT_API shardopt_status shardopt_device_optimizer_bucket_grad(shardopt_device_optimizer opt, int bucket,
                                                                   void **grad, size_t *count) {
    return guard(__func__, [&] { ops::bucket_grad(device_opt_of(opt), bucket, grad, count); });
}

SHARDOPT_API shardopt_status shardopt_device_optimizer_tensor_grad(shardopt_device_optimizer opt, int tensor,
                                                                   void **grad, size_t *count) {
    return guard(__func__, [&] { ops::tensor_grad(device_opt_of(opt), tensor, grad, count); });
}

SHARDOPT_API shardopt_status shardopt_device_optimizer_grad_ready(shardopt_device_optimizer opt, int bucket) {
    return guard(__func__, [&] { ops::grad_ready(device_opt_of(opt), bucket); });
}

SHARDOPT_API shardopt_status shardopt_device_optimizer_step(shardopt_device_optimizer opt,
                                                            shardopt_step_result *result) {
    return guard(__func__, [&] { ops::step(device_opt_of(opt), result); });
}

SHARDOPT_API shardopt_status shardopt_device_optimizer_synchronize_state(shardopt_device_optimizer opt) {
    return guard(__func__, [&] { device_opt_of(opt).synchronize_optimizer_state(); });
}

SHARDOPT_API shardopt_status shardopt_device_optimizer_should_early_stop(shardopt_device_optimizer opt, int vote,
                                                                         int *stop) {
    return guard(__func__, [&] { ops::should_early_stop(device_opt_of(opt), vote, stop); });
}

SHARDOPT_API shardopt_status shardopt_device_optimizer_memory_stats(shardopt_device_optimizer opt,
                                                                    shardopt_memory_stats *stats) {
    return guard(__func__, [&] { ops::memory_stats(device_opt_of(opt), stats); });
}

SHARDOPT_API shardopt_status shardopt_device_optimizer_optimize(shardopt_device_optimizer opt, shardopt_model_fn model,
                                                                void *user_data,
                                                                const shardopt_optimize_options *options,
                                                                shardopt_optimize_result *result) {
    return guard(__func__, [&] {
        auto &o = device_opt_of(opt);
        ops::optimize(o, *opt->comm, model, user_data, options, result);
    });
}

SHARDOPT_API shardopt_status shardopt_device_optimizer_save(shardopt_device_optimizer opt, const char *dir,
                                                            shardopt_checkpoint_form form) {
    return guard(__func__, [&] { ops::save(device_opt_of(opt), dir, form); });
}

SHARDOPT_API shardopt_status shardopt_device_optimizer_load(shardopt_device_optimizer opt, const char *dir) {
    return guard(__func__, [&] { ops::load(device_opt_of(opt), dir); });
}

SHARDOPT_API shardopt_status shardopt_device_optimizer_serialize(shardopt_device_optimizer opt, void **data,
                                                                 size_t *size) {
    return guard(__func__, [&] { ops::serialize(device_opt_of(opt), data, size); });
}

SHARDOPT_API shardopt_status shardopt_device_optimizer_deserialize(shardopt_device_optimizer opt, const void *data,
                                                                   size_t size) {
    return guard(__func__, [&] { ops::deserialize(device_opt_of(opt), data, size); });
}

} // extern "C"

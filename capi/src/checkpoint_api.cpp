// Checkpoints through the C ABI: save/load a directory, serialize to library-owned bytes (bodies
// in optimizer_ops.hpp).
#include <cstdlib>

#include "capi_internal.hpp"
#include "optimizer_ops.hpp"

using namespace shardopt;
using namespace shardopt::capi;

SHARDOPT_API shardopt_status shardopt_optimizer_save(shardopt_optimizer opt, const char *dir,
                                                     shardopt_checkpoint_form form) {
    return guard(__func__, [&] { ops::save(opt_of(opt), dir, form); });
}

SHARDOPT_API shardopt_status shardopt_optimizer_load(shardopt_optimizer opt, const char *dir) {
    return guard(__func__, [&] { ops::load(opt_of(opt), dir); });
}

SHARDOPT_API shardopt_status shardopt_optimizer_serialize(shardopt_optimizer opt, void **data, size_t *size) {
    return guard(__func__, [&] { ops::serialize(opt_of(opt), data, size); });
}

SHARDOPT_API shardopt_status shardopt_optimizer_deserialize(shardopt_optimizer opt, const void *data, size_t size) {
    return guard(__func__, [&] { ops::deserialize(opt_of(opt), data, size); });
}

SHARDOPT_API shardopt_status shardopt_buffer_free(void *data) {
    std::free(data);
    return SHARDOPT_OK;
}

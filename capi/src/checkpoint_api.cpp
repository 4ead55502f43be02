// Checkpoints through the C ABI: save/load a directory, serialize to library-owned bytes. The
// files do not depend on the optimizer's memory space.
#include <cstdlib>
#include <string>
#include <vector>

#include "capi_internal.hpp"

using namespace shardopt;
using namespace shardopt::capi;

extern "C" {

SHARDOPT_API shardopt_status shardopt_optimizer_save(shardopt_optimizer opt, const char *dir,
                                                     shardopt_checkpoint_form form) {
    return guard(__func__, [&] {
        ShardedOptimizer &o = opt_of(opt);
        not_null(dir, "dir");
        require(form == SHARDOPT_CHECKPOINT_SHARDED || form == SHARDOPT_CHECKPOINT_CONSOLIDATED,
                ErrorCode::invalid_argument,
                "form " + std::to_string(int(form)) + " is not a shardopt_checkpoint_form");
        o.save(dir, form == SHARDOPT_CHECKPOINT_SHARDED ? CheckpointForm::sharded : CheckpointForm::consolidated);
    });
}

SHARDOPT_API shardopt_status shardopt_optimizer_load(shardopt_optimizer opt, const char *dir) {
    return guard(__func__, [&] {
        ShardedOptimizer &o = opt_of(opt);
        not_null(dir, "dir");
        o.load(dir);
    });
}

// The bytes in a malloc'ed buffer (shardopt_buffer_free releases it).
SHARDOPT_API shardopt_status shardopt_optimizer_serialize(shardopt_optimizer opt, void **data, size_t *size) {
    return guard(__func__, [&] {
        ShardedOptimizer &o = opt_of(opt);
        not_null(data, "data");
        not_null(size, "size");
        const std::vector<unsigned char> bytes = o.serialize();
        void *out = std::malloc(bytes.empty() ? 1 : bytes.size());
        if (!out) throw std::bad_alloc();
        if (!bytes.empty()) std::memcpy(out, bytes.data(), bytes.size());
        *data = out;
        *size = bytes.size();
    });
}

// The same bytes to a writer callback, a window at a time; a writer's nonzero return ends its
// calls here and fails the call on every rank once the stream is over (ShardedOptimizer's rule),
// naming the reason the writer gave through shardopt_model_error (a binding's stream exception).
SHARDOPT_API shardopt_status shardopt_optimizer_serialize_to(shardopt_optimizer opt, shardopt_write_fn write,
                                                             void *user_data) {
    return guard(__func__, [&] {
        ShardedOptimizer &o = opt_of(opt);
        if (!write) {
            o.serialize(ShardedOptimizer::ByteWriter{});
            return;
        }
        take_model_error(); // a reason left by an earlier callback is not this writer's
        o.serialize([&](const void *data, std::size_t size) {
            const int rc = write(user_data, data, size);
            if (rc != 0) {
                std::string why = "serialize_to: the writer returned " + std::to_string(rc) + " on rank " +
                                  std::to_string(o.rank());
                const std::string reason = take_model_error();
                if (!reason.empty()) why += ": " + reason;
                throw Error(ErrorCode::io, why);
            }
        });
    });
}

SHARDOPT_API shardopt_status shardopt_optimizer_deserialize(shardopt_optimizer opt, const void *data, size_t size) {
    return guard(__func__, [&] {
        ShardedOptimizer &o = opt_of(opt);
        not_null(data, "data");
        o.deserialize(data, size);
    });
}

SHARDOPT_API shardopt_status shardopt_buffer_free(void *data) {
    std::free(data);
    return SHARDOPT_OK;
}

} // extern "C"

// Checkpoints through the C ABI: save/load a directory, serialize to library-owned bytes. The
// files do not depend on the optimizer's memory space.
#include <cstdlib>
#include <string>
#include <vector>

#include "capi_internal.hpp"
#include "../../src/checkpoint/offline.hpp"

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

SHARDOPT_API shardopt_status shardopt_checkpoint_describe(const void *data, size_t size,
                                                          shardopt_checkpoint_info *info) {
    // the strings _describe returns: this thread's, until its next call
    thread_local std::string optimizer, torch_optimizer, state_names;
    return guard(__func__, [&] {
        not_null(data, "data");
        not_null(info, "info");
        check_out_struct(info, "checkpoint info");
        const checkpoint::SerializedCheckpoint c = checkpoint::describe_serialized(data, size);
        optimizer = optimizer_kind_name(OptimizerKind(c.meta.optimizer_kind));
        torch_optimizer = c.torch.torch_class;
        state_names.clear();
        for (const auto &n : c.torch.slots) state_names += (state_names.empty() ? "" : ",") + n;
        shardopt_checkpoint_info out{};
        out.tensor_count = int32_t(c.meta.layout.tensors.size());
        out.state_slots = c.meta.state_slots;
        out.step_count = c.meta.step_count;
        out.element_count = c.element_count;
        out.dtype = shardopt_dtype(c.meta.layout.dtype);
        out.optimizer = optimizer.c_str();
        out.torch_optimizer = torch_optimizer.c_str();
        out.state_names = state_names.c_str();
        out.torch_step = c.torch.step ? 1 : 0;
        write_struct(info, out, "checkpoint info");
    });
}

SHARDOPT_API shardopt_status shardopt_checkpoint_read(const void *data, size_t size, int32_t slot, void *buffer,
                                                      size_t count, shardopt_dtype dtype) {
    return guard(__func__, [&] {
        not_null(data, "data");
        not_null(buffer, "buffer");
        const checkpoint::SerializedCheckpoint c = checkpoint::describe_serialized(data, size);
        require(dtype_arg(dtype) == c.meta.layout.dtype, ErrorCode::invalid_argument,
                std::string("the buffer holds ") + dtype_name(DType(dtype)) + "; the checkpoint's parts are " +
                    dtype_name(c.meta.layout.dtype));
        checkpoint::read_serialized_part(data, size, slot, buffer, count);
    });
}

} // extern "C"

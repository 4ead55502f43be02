// Internals shared by the C ABI's implementation files: the handle structs and the guard that
// turns every C++ exception into a status plus a thread-local message.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <atomic>
#include <thread>

// The library defines the experimental part of the ABI as well.
#define SHARDOPT_EXPERIMENTAL
#include "shardopt.h"
#include "shardopt/comm.hpp"
#include "shardopt/elastic.hpp"
#include "shardopt/error.hpp"
#include "shardopt/params.hpp"
#include "shardopt/sharded_optimizer.hpp"
#include "shardopt/work.hpp"

// Each handle starts with a tag, so a handle of the wrong kind or one already destroyed (tag
// cleared) is usually reported instead of misused.
enum class HandleTag : std::uint32_t {
    comm = 0x636f6d6d,
    work = 0x776f726b,
    params = 0x70617273,
    optimizer = 0x6f707469,
    dead = 0
};

struct shardopt_comm_s {
    HandleTag tag = HandleTag::comm;
    shardopt::CommunicatorPtr comm;
};
struct shardopt_work_s {
    HandleTag tag = HandleTag::work;
    shardopt::WorkPtr work;
};
struct shardopt_params_s {
    HandleTag tag = HandleTag::params;
    shardopt::ParameterSet set;
    explicit shardopt_params_s(shardopt::ParameterSet s) : set(std::move(s)) {}
};
struct shardopt_optimizer_s {
    HandleTag tag = HandleTag::optimizer;
    std::unique_ptr<shardopt::ShardedOptimizer> opt;
    // Set by shardopt_optimizer_make_elastic: the checkpoint schedule around opt (declared after
    // it, so destroyed first).
    std::unique_ptr<shardopt::ElasticOptimizer> elastic;
    // The thread running shardopt_optimizer_optimize or _train, or a pipeline batch on the optimizer
    // (in_pipeline), while it runs: its callbacks must not call back into (or destroy) the optimizer
    // whose buffers the loop is using, and no other thread may use it meanwhile.
    std::atomic<std::thread::id> training_thread{};
    std::atomic<bool> in_pipeline{false};
    // The lr of the caller's options when opt last took it (create, shardopt_optimizer_follow_options).
    double options_lr = 0;
};

namespace shardopt::capi {

// What a callback on this thread said about its failure (shardopt_model_error), cleared.
std::string take_model_error();

// Records "function: message" (and call_rank) as this thread's last error and returns code.
shardopt_status fail(ErrorCode code, const char *function, const char *message) noexcept;
// The rank of the communicator or optimizer handle the current call resolved (-1: none yet).
extern thread_local int call_rank;

template <typename F> shardopt_status guard(const char *function, F &&body) noexcept {
    call_rank = -1;
    try {
        body();
        return SHARDOPT_OK;
    } catch (const Error &e) {
        return fail(e.code(), function, e.what());
    } catch (const std::bad_alloc &) {
        return fail(ErrorCode::out_of_memory, function, "out of memory");
    } catch (const std::exception &e) {
        return fail(ErrorCode::internal, function, e.what());
    } catch (...) {
        return fail(ErrorCode::internal, function, "unknown exception");
    }
}

// Argument checks, one line each; they throw Error(invalid_argument) with the argument's name.
template <typename H> H *check(H *handle, HandleTag tag, const char *what) {
    require(handle != nullptr, ErrorCode::invalid_argument, std::string(what) + " handle is NULL");
    require(handle->tag == tag, ErrorCode::invalid_argument,
            std::string(what) + " handle is invalid (destroyed, or another kind of handle)");
    return handle;
}
inline Communicator &comm_of(shardopt_comm c) {
    Communicator &comm = *check(c, HandleTag::comm, "communicator")->comm;
    call_rank = comm.rank();
    return comm;
}
// For what reads (queries, the learning rate): allowed from the model callback too.
inline ShardedOptimizer &opt_query_of(shardopt_optimizer o) {
    ShardedOptimizer &opt = *check(o, HandleTag::optimizer, "optimizer")->opt;
    call_rank = opt.rank();
    return opt;
}
// For what changes the optimizer or is collective: refused from inside its own optimize() or pipeline
// batch (stage_may_call: a pipeline stage may, from the batch's thread: tensor_parameters).
inline ShardedOptimizer &opt_of(shardopt_optimizer o, bool stage_may_call = false) {
    shardopt_optimizer_s *h = check(o, HandleTag::optimizer, "optimizer");
    call_rank = h->opt->rank();
    const std::thread::id trainer = h->training_thread.load();
    if (trainer != std::thread::id() && h->in_pipeline) {
        const bool stage = trainer == std::this_thread::get_id();
        require(stage && stage_may_call, ErrorCode::invalid_state,
                std::string("not while a pipeline batch is running on this optimizer (called from ") +
                    (stage ? "a stage callback)" : "another thread)"));
    } else if (trainer != std::thread::id()) {
        require(trainer != std::this_thread::get_id(), ErrorCode::invalid_state,
                "called from inside this optimizer's training loop (its model callback): the loop is using it");
        throw Error(ErrorCode::invalid_state,
                    "called from another thread while this optimizer trains (optimize or train runs on another "
                    "thread): one handle is used by one thread at a time");
    }
    return *h->opt;
}
// Marks the handle as busy on this thread (training, or running a pipeline batch) for the call's
// duration, however it ends.
class BusyCall {
  public:
    BusyCall(shardopt_optimizer_s *h, bool pipeline) : h_(h) {
        h_->in_pipeline = pipeline;
        h_->training_thread = std::this_thread::get_id();
    }
    ~BusyCall() { h_->training_thread = std::thread::id(); }
    BusyCall(const BusyCall &) = delete;
    BusyCall &operator=(const BusyCall &) = delete;

  private:
    shardopt_optimizer_s *h_;
};
inline ParameterSet &params_of(shardopt_params p) { return check(p, HandleTag::params, "parameter set")->set; }
// destroy(NULL) is a no-op; any other handle is checked, marked dead and deleted.
template <typename H> void destroy(H *handle, HandleTag tag, const char *what) {
    if (!handle) return;
    check(handle, tag, what);
    handle->tag = HandleTag::dead;
    delete handle;
}
inline void not_null(const void *p, const char *name) {
    require(p != nullptr, ErrorCode::invalid_argument, std::string(name) + " is NULL");
}
inline DType dtype_arg(shardopt_dtype d) {
    require(is_valid(DType(d)), ErrorCode::invalid_argument, "invalid dtype " + std::to_string(int(d)));
    return DType(d);
}
// shardopt_*_check_array: an array a binding passes as `what` against `need` elements of set's dtype.
inline void array_arg(const ParameterSet &set, const char *what, shardopt_dtype dtype, std::size_t count,
                      std::size_t need) {
    not_null(what, "what");
    auto name = [](DType d) { return d == DType::f32 ? "float32" : d == DType::f64 ? "float64" : dtype_name(d); };
    require(DType(dtype) == set.dtype(), ErrorCode::invalid_argument,
            std::string(what) + " holds " + (is_valid(DType(dtype)) ? name(DType(dtype)) : "invalid-dtype") +
                " elements but the layout is " + name(set.dtype()));
    require(count == need, ErrorCode::invalid_argument,
            std::string(what) + " has " + std::to_string(count) + " elements; the layout needs " + std::to_string(need));
}
inline ReduceOp op_arg(shardopt_reduce_op op) {
    require(is_valid(ReduceOp(op)), ErrorCode::invalid_argument, "invalid reduce op " + std::to_string(int(op)));
    return ReduceOp(op);
}

// Versioned structs: copies the `size` bytes the caller has into a zeroed library-side struct
// (zero means default beyond). Rejects sizes smaller than min_size (struct_size and the first
// field) or larger than known.
template <typename T> T read_struct(const T *user, const char *name, std::size_t min_size) {
    not_null(user, name);
    const std::size_t size = user->struct_size;
    require(size >= min_size, ErrorCode::invalid_argument,
            std::string(name) + ": struct_size " + std::to_string(size) +
                " is too small (initialize it with its _init function)");
    require(size <= sizeof(T), ErrorCode::unsupported,
            std::string(name) + ": struct_size " + std::to_string(size) + " is larger than this library's " +
                std::to_string(sizeof(T)) + " (built against a newer shardopt.h?)");
    T full{};
    std::memcpy(static_cast<void *>(&full), user, size);
    return full;
}
// The _strict validate functions: `field` (at `offset` of the caller's struct c) is 0 where the C ABI
// reads 0 as a default that _init writes as a value (`init`, in words), so the 0 was the caller's.
template <typename S, typename V>
void require_set(const S &c, std::size_t offset, V value, const std::string &init, const char *what,
                 const char *field) {
    if (offset + sizeof(V) > c.struct_size || value != V(0)) return;
    throw Error(ErrorCode::invalid_argument, std::string(what) + ": " + field + " is 0, which the C ABI reads as " +
                                                 "its default (" + init + "), not as a value: give a value, or leave " +
                                                 "the field as _init filled it");
}
// Output structs: the caller must have set struct_size (checked before any work is done).
template <typename T> void check_out_struct(const T *user, const char *name) {
    require(user->struct_size >= sizeof(std::size_t), ErrorCode::invalid_argument,
            std::string(name) + ": struct_size is not set (set it to sizeof the struct)");
}
// Output structs: writes only the first struct_size bytes the caller declared.
template <typename T> void write_struct(T *user, const T &value, const char *name) {
    check_out_struct(user, name);
    const std::size_t size = user->struct_size;
    const std::size_t n = size < sizeof(T) ? size : sizeof(T);
    T copy = value;
    copy.struct_size = size;
    std::memcpy(static_cast<void *>(user), &copy, n);
}

// A rank's bytes as the C struct (the optimizer's own and the planner's prediction of it), written
// as write_struct does.
inline void write_memory_stats(shardopt_memory_stats *user, const MemoryStats &m) {
    shardopt_memory_stats c{};
    c.params_bytes = m.params_bytes;
    c.grads_bytes = m.grads_bytes;
    c.optimizer_state_bytes = m.optimizer_state_bytes;
    c.buffer_bytes = m.buffer_bytes;
    c.peak_buffer_bytes = m.peak_buffer_bytes;
    c.total_bytes = m.total();
    c.compression_bytes = m.compression_bytes;
    c.host_params_bytes = m.host_params_bytes;
    c.host_grads_bytes = m.host_grads_bytes;
    c.host_optimizer_state_bytes = m.host_optimizer_state_bytes;
    c.host_total_bytes = m.host_total();
    write_struct(user, c, "memory stats");
}

} // namespace shardopt::capi

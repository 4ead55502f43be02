/* shardopt_csharp.i — the csharp half of the SWIG interface (bindings/shardopt.i includes it). */
/* shardopt.i — the one SWIG interface over the C ABI (capi/include/shardopt.h). It generates the
 * C#, Java and Python modules at build time (never committed); the thin hand-written layers in
 * bindings/<language>/ give the idiomatic AiDotNet-style surface on top of them.
 *
 * What this file adds over shardopt.h, identically for every language:
 *  - so_* helpers that return their result instead of writing it through a pointer, so no
 *    language needs pointer-to-handle typemaps. Each helper records a failure (status and the
 *    library's message) in thread-local storage; one %exception block per language turns it
 *    into that language's exception right after the call (see "Errors" below).
 *  - so_comm_inmemory(environment_id, rank, world_size): rank `rank` of the in-process group
 *    named environment_id, so each rank's backend object can be built on its own thread, as in
 *    AiDotNet (the C ABI's experimental shardopt_comm_create_inprocess_member).
 *  - so_bytes: a region of library memory (parameters, gradients), returned without a copy as a
 *    Python memoryview, a Java direct ByteBuffer or a C# IntPtr.
 *  - void *WBUF / const void *RBUF: caller memory passed without a copy (Python buffer protocol,
 *    Java direct Buffer or primitive array, C# pinned IntPtr).
 *  - checkpoints: so_serialize keeps the library's serialized buffer per thread and returns its
 *    size, so_serialized_take copies it into a byte array the language allocated (WBUF) and frees
 *    it; so_deserialize, so_save (sharded or consolidated), so_load.
 *  - optimize() trampolines: a C shardopt_model_fn that calls a Python callable or a Java object;
 *    C# passes a delegate's function pointer straight to the C ABI.
 *
 * Errors: INVALID_ARGUMENT -> ValueError / IllegalArgumentException / ArgumentException;
 * INVALID_STATE, TIMEOUT, MISMATCH, PEER_LOST, INTERNAL -> RuntimeError / IllegalStateException /
 * InvalidOperationException (TimeoutException for TIMEOUT in C#); IO, CORRUPT -> OSError /
 * java.io.IOException / IOException; UNSUPPORTED -> NotImplementedError /
 * UnsupportedOperationException / NotSupportedException; OUT_OF_MEMORY -> MemoryError /
 * OutOfMemoryError / OutOfMemoryException. Messages read "SHARDOPT_ERR_X: <library message>".
 */

%{
#define SHARDOPT_EXPERIMENTAL /* shardopt_comm_create_inprocess_member */
#include "shardopt.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SO_ERR_FOREIGN 1000 /* a callback raised a language exception, kept to re-raise */

static __thread int so_err_status;
static __thread char so_err_msg[2048];

static void so_fail(int status, const char *fmt, ...) {
    va_list ap;
    int n;
    so_err_status = status;
    n = snprintf(so_err_msg, sizeof so_err_msg, "%s: ", shardopt_status_name((shardopt_status)status));
    if (n < 0 || n >= (int)sizeof so_err_msg) n = 0;
    va_start(ap, fmt);
    vsnprintf(so_err_msg + n, sizeof so_err_msg - (size_t)n, fmt, ap);
    va_end(ap);
}

/* Records a failed C ABI call with the library's own message. */
#define SO_TRY(call, ret)                                                            \
    do {                                                                             \
        shardopt_status so_s_ = (call);                                              \
        if (so_s_ != SHARDOPT_OK) {                                                  \
            so_fail(so_s_, "%s", shardopt_last_error_message());                     \
            return ret;                                                              \
        }                                                                            \
    } while (0)
#define SO_VOID

typedef struct so_bytes {
    void *ptr;
    size_t bytes;
} so_bytes;

%}

/* ------------------------------------------------------------------------------------------------
 * Per-language plumbing
 * ---------------------------------------------------------------------------------------------- */
%{
typedef void (SWIGSTDCALL *so_cs_exception_callback)(const char *message, int status);
static so_cs_exception_callback so_cs_callback;

SWIGEXPORT void SWIGSTDCALL so_cs_register_exception_callback(so_cs_exception_callback cb) {
    so_cs_callback = cb;
}
%}

/* The managed callback maps the status to an exception type and sets it pending; the proxy
 * method rethrows it when the native call returns. */
%pragma(csharp) imclasscode=%{
  internal class SoExceptionHelper {
    public delegate void ExceptionDelegate(string message, int status);
    static ExceptionDelegate callback = new ExceptionDelegate(SetPending);

    [global::System.Runtime.InteropServices.DllImport("$dllimport", EntryPoint="so_cs_register_exception_callback")]
    public static extern void Register(ExceptionDelegate cb);

    static void SetPending(string message, int status) {
      global::System.Exception e;
      switch (status) {
        case 1: e = new global::System.ArgumentException(message); break;
        case 3: e = new global::System.TimeoutException(message); break;
        case 6: case 7: e = new global::System.IO.IOException(message); break;
        case 8: e = new global::System.OutOfMemoryException(message); break;
        case 9: e = new global::System.NotSupportedException(message); break;
        default: e = new global::System.InvalidOperationException(message); break;
      }
      SWIGPendingException.Set(e);
    }

    static SoExceptionHelper() { Register(callback); }
  }
  static SoExceptionHelper soExceptionHelper = new SoExceptionHelper();
%}

%exception {
    so_err_status = 0;
    $action
    if (so_err_status) {
        if (so_cs_callback) so_cs_callback(so_err_msg, so_err_status);
        return $null;
    }
}

%apply void *VOID_INT_PTR { void *WBUF, const void *RBUF, void *FNPTR, void *USERDATA }
%typemap(ctype) so_bytes "void *"
%typemap(imtype) so_bytes "global::System.IntPtr"
%typemap(cstype) so_bytes "global::System.IntPtr"
%typemap(out) so_bytes %{ $result = $1.ptr; %}
%typemap(csout, excode=SWIGEXCODE) so_bytes {
    global::System.IntPtr ret = $imcall;$excode
    return ret;
  }

/* ------------------------------------------------------------------------------------------------
 * The option and result structs of shardopt.h (fields as in C), and its enums; no raw functions.
 * ---------------------------------------------------------------------------------------------- */
/* C enums as plain int constants everywhere (the layers define their own enums) */
%include "enumsimple.swg"
%csconst(1);
%apply long long { int64_t };
%apply int { int32_t };
%apply unsigned long long { size_t, uint64_t }; /* C# `ulong`: 64 bits, as size_t is here */
%ignore shardopt_optimize_result::best_parameters;
%ignore shardopt_optimize_result::best_parameters_count;
%ignore shardopt_optimize_result::loss_history;
%ignore shardopt_optimize_result::loss_history_capacity;
%ignore shardopt_elastic_options; /* so_make_elastic takes the fields */
%ignore shardopt_elastic_status::checkpoint_dir; /* so_elastic_dir */
%immutable shardopt_step_result::struct_size;
%rename("$ignore", %$isfunction, regextarget=1) "^shardopt_";
%rename("%s") shardopt_version;
%rename("%s") shardopt_abi_version;
#define SHARDOPT_API
%include "shardopt.h"

%apply void *WBUF { void *buffer, void *recv, void *param_buffer, void *packed_out, void *best, void *history }
%apply const void *RBUF { const void *send, const void *initial, const void *packed }

/* ------------------------------------------------------------------------------------------------
 * Helpers: results returned, failures recorded for %exception
 * ---------------------------------------------------------------------------------------------- */
%inline %{
/* ---- communicators ---- */
/* environment_id NULL: "default". Each rank claims its handle once; the id is free again once all
 * ranks have claimed theirs. */
shardopt_comm so_comm_inmemory(const char *environment_id, int rank, int world_size) {
    shardopt_comm c = NULL;
    SO_TRY(shardopt_comm_create_inprocess_member(environment_id ? environment_id : "default", rank, world_size, &c),
           NULL);
    return c;
}

/* backend: "ucx", "inprocess" or NULL ($SHARDOPT_BACKEND) */
shardopt_comm so_comm_from_env(const char *backend) {
    shardopt_comm c = NULL;
    SO_TRY(shardopt_comm_create_from_env(backend, &c), NULL);
    return c;
}

shardopt_comm so_comm_nccl(int rank, int world_size, int device_id) {
    (void)rank; (void)world_size; (void)device_id;
    so_fail(SHARDOPT_ERR_UNSUPPORTED, "the NCCL backend is not in the shardopt C ABI %u.%u yet",
            shardopt_version() / 10000, shardopt_version() / 100 % 100);
    return NULL;
}

void so_comm_destroy(shardopt_comm comm) { SO_TRY(shardopt_comm_destroy(comm), SO_VOID); }
int so_comm_rank(shardopt_comm comm) { int r = -1; SO_TRY(shardopt_comm_rank(comm, &r), -1); return r; }
int so_comm_size(shardopt_comm comm) { int s = -1; SO_TRY(shardopt_comm_size(comm, &s), -1); return s; }
void so_comm_set_timeout(shardopt_comm comm, int64_t ms) { SO_TRY(shardopt_comm_set_timeout(comm, ms), SO_VOID); }
void so_comm_abort(shardopt_comm comm, const char *reason) { SO_TRY(shardopt_comm_abort(comm, reason), SO_VOID); }
shardopt_comm so_comm_split(shardopt_comm comm, int color, int key) {
    shardopt_comm c = NULL;
    SO_TRY(shardopt_comm_split(comm, color, key, &c), NULL);
    return c;
}
void so_barrier(shardopt_comm comm) { SO_TRY(shardopt_barrier(comm), SO_VOID); }
void so_allreduce(shardopt_comm comm, void *buffer, size_t count, int dtype, int op) {
    SO_TRY(shardopt_allreduce(comm, buffer, buffer, count, (shardopt_dtype)dtype, (shardopt_reduce_op)op), SO_VOID);
}
void so_broadcast(shardopt_comm comm, void *buffer, size_t count, int dtype, int root) {
    SO_TRY(shardopt_broadcast(comm, buffer, count, (shardopt_dtype)dtype, root), SO_VOID);
}
void so_allgather(shardopt_comm comm, const void *send, void *recv, size_t send_count, int dtype) {
    SO_TRY(shardopt_allgather(comm, send, recv, send_count, (shardopt_dtype)dtype), SO_VOID);
}

/* ---- options ---- */
void so_optimizer_options_defaults(shardopt_optimizer_options *opts, int kind) {
    SO_TRY(shardopt_optimizer_options_init_sized(opts, sizeof *opts, (shardopt_optimizer_kind)kind), SO_VOID);
}
void so_sharding_options_defaults(shardopt_sharding_options *opts) {
    SO_TRY(shardopt_sharding_options_init_sized(opts, sizeof *opts), SO_VOID);
}
void so_optimize_options_defaults(shardopt_optimize_options *opts) {
    SO_TRY(shardopt_optimize_options_init_sized(opts, sizeof *opts), SO_VOID);
}

/* ---- parameter sets ---- */
shardopt_params so_params_create(int dtype, size_t bucket_bytes) {
    shardopt_params p = NULL;
    SO_TRY(shardopt_params_create((shardopt_dtype)dtype, bucket_bytes, &p), NULL);
    return p;
}
void so_params_destroy(shardopt_params params) { SO_TRY(shardopt_params_destroy(params), SO_VOID); }
int so_params_add(shardopt_params params, const char *name, size_t count, int tp_replicated) {
    int index = -1;
    SO_TRY(shardopt_params_add(params, name, count, tp_replicated, &index), -1);
    return index;
}
/* A rows x cols (row-major) tensor: what PowerSGD compresses (shardopt_params_add_matrix). */
int so_params_add_matrix(shardopt_params params, const char *name, size_t rows, size_t cols, int tp_replicated) {
    int index = -1;
    SO_TRY(shardopt_params_add_matrix(params, name, rows, cols, tp_replicated, &index), -1);
    return index;
}
void so_params_end_bucket(shardopt_params params) { SO_TRY(shardopt_params_end_bucket(params), SO_VOID); }
size_t so_params_element_count(shardopt_params params) {
    size_t n = 0;
    SO_TRY(shardopt_params_element_count(params, &n), 0);
    return n;
}
size_t so_params_padded_count(shardopt_params params, int shards) {
    size_t n = 0;
    SO_TRY(shardopt_params_padded_count(params, shards, &n), 0);
    return n;
}

/* ---- sharded optimizers ---- */
shardopt_optimizer so_optimizer_create(shardopt_comm comm, shardopt_params params,
                                       const shardopt_optimizer_options *optimizer,
                                       const shardopt_sharding_options *sharding, const void *initial) {
    shardopt_optimizer o = NULL;
    SO_TRY(shardopt_optimizer_create(comm, params, optimizer, sharding, initial, &o), NULL);
    return o;
}
/* Parameters live in the caller's buffer (padded_count elements), which must outlive the optimizer. */
shardopt_optimizer so_optimizer_create_external(shardopt_comm comm, shardopt_params params,
                                                const shardopt_optimizer_options *optimizer,
                                                const shardopt_sharding_options *sharding, const void *initial,
                                                void *param_buffer, size_t param_count) {
    shardopt_optimizer o = NULL;
    SO_TRY(shardopt_optimizer_create_external(comm, params, optimizer, sharding, initial, param_buffer, param_count, &o), NULL);
    return o;
}
void so_optimizer_destroy(shardopt_optimizer opt) { SO_TRY(shardopt_optimizer_destroy(opt), SO_VOID); }
int so_tensor_count(shardopt_optimizer opt) { int n = 0; SO_TRY(shardopt_optimizer_tensor_count(opt, &n), 0); return n; }
size_t so_tensor_size(shardopt_optimizer opt, int tensor) {
    size_t n = 0;
    SO_TRY(shardopt_optimizer_tensor_info(opt, tensor, &n, NULL), 0);
    return n;
}
int so_tensor_bucket(shardopt_optimizer opt, int tensor) {
    int b = -1;
    SO_TRY(shardopt_optimizer_tensor_info(opt, tensor, NULL, &b), -1);
    return b;
}
int so_bucket_count(shardopt_optimizer opt) { int n = 0; SO_TRY(shardopt_optimizer_bucket_count(opt, &n), 0); return n; }
size_t so_bucket_size(shardopt_optimizer opt, int bucket) {
    size_t n = 0;
    SO_TRY(shardopt_optimizer_bucket_info(opt, bucket, &n), 0);
    return n;
}
size_t so_element_count(shardopt_optimizer opt) {
    size_t n = 0;
    SO_TRY(shardopt_optimizer_element_count(opt, &n, NULL), 0);
    return n;
}
size_t so_padded_count(shardopt_optimizer opt) {
    size_t n = 0;
    SO_TRY(shardopt_optimizer_element_count(opt, NULL, &n), 0);
    return n;
}
void so_set_learning_rate(shardopt_optimizer opt, double lr) { SO_TRY(shardopt_optimizer_set_learning_rate(opt, lr), SO_VOID); }
double so_learning_rate(shardopt_optimizer opt) {
    double lr = 0;
    SO_TRY(shardopt_optimizer_learning_rate(opt, &lr), 0);
    return lr;
}
/* Raw-pointer collectives for Java and C#, whose layers check the arrays' lengths and element
 * types first (Python's so_py_* wrappers check buffer sizes here instead). */
void so_reduce_scatter(shardopt_comm comm, const void *send, void *recv, size_t recv_count, int dtype, int op) {
    SO_TRY(shardopt_reduce_scatter(comm, send, recv, recv_count, (shardopt_dtype)dtype, (shardopt_reduce_op)op), SO_VOID);
}
void so_send(shardopt_comm comm, const void *send, size_t count, int dtype, int peer, int tag) {
    SO_TRY(shardopt_send(comm, send, count, (shardopt_dtype)dtype, peer, tag), SO_VOID);
}
void so_recv(shardopt_comm comm, void *recv, size_t count, int dtype, int peer, int tag) {
    SO_TRY(shardopt_recv(comm, recv, count, (shardopt_dtype)dtype, peer, tag), SO_VOID);
}
int64_t so_step_count(shardopt_optimizer opt) { int64_t n = 0; SO_TRY(shardopt_optimizer_step_count(opt, &n), 0); return n; }

/* Library memory, without a copy; element_size is that of the optimizer's dtype. */
so_bytes so_parameters(shardopt_optimizer opt, size_t element_size) {
    so_bytes r = {NULL, 0};
    size_t n = 0;
    SO_TRY(shardopt_optimizer_element_count(opt, NULL, &n), r);
    SO_TRY(shardopt_optimizer_parameters(opt, &r.ptr), r);
    r.bytes = n * element_size;
    return r;
}
so_bytes so_tensor_parameters(shardopt_optimizer opt, int tensor, size_t element_size) {
    so_bytes r = {NULL, 0};
    size_t n = 0;
    SO_TRY(shardopt_optimizer_tensor_info(opt, tensor, &n, NULL), r);
    SO_TRY(shardopt_optimizer_tensor_parameters(opt, tensor, &r.ptr), r);
    r.bytes = n * element_size;
    return r;
}
so_bytes so_gather(shardopt_optimizer opt, int bucket, size_t element_size) {
    so_bytes r = {NULL, 0};
    size_t n = 0;
    SO_TRY(shardopt_optimizer_bucket_info(opt, bucket, &n), r);
    SO_TRY(shardopt_optimizer_gather(opt, bucket, &r.ptr), r);
    r.bytes = n * element_size;
    return r;
}
void so_release(shardopt_optimizer opt, int bucket) { SO_TRY(shardopt_optimizer_release(opt, bucket), SO_VOID); }
void so_get_parameters(shardopt_optimizer opt, void *packed_out, size_t count) {
    SO_TRY(shardopt_optimizer_get_parameters(opt, packed_out, count), SO_VOID);
}
void so_set_parameters(shardopt_optimizer opt, const void *packed, size_t count) {
    SO_TRY(shardopt_optimizer_set_parameters(opt, packed, count), SO_VOID);
}

/* ---- step protocol ---- */
void so_zero_grad(shardopt_optimizer opt) { SO_TRY(shardopt_optimizer_zero_grad(opt), SO_VOID); }
so_bytes so_bucket_grad(shardopt_optimizer opt, int bucket, size_t element_size) {
    so_bytes r = {NULL, 0};
    size_t n = 0;
    SO_TRY(shardopt_optimizer_bucket_grad(opt, bucket, &r.ptr, &n), r);
    r.bytes = n * element_size;
    return r;
}
so_bytes so_tensor_grad(shardopt_optimizer opt, int tensor, size_t element_size) {
    so_bytes r = {NULL, 0};
    size_t n = 0;
    SO_TRY(shardopt_optimizer_tensor_grad(opt, tensor, &r.ptr, &n), r);
    r.bytes = n * element_size;
    return r;
}
void so_grad_ready(shardopt_optimizer opt, int bucket) { SO_TRY(shardopt_optimizer_grad_ready(opt, bucket), SO_VOID); }
void so_step(shardopt_optimizer opt, shardopt_step_result *result) {
    if (result) result->struct_size = sizeof *result;
    SO_TRY(shardopt_optimizer_step(opt, result), SO_VOID);
}
void so_synchronize_state(shardopt_optimizer opt) { SO_TRY(shardopt_optimizer_synchronize_state(opt), SO_VOID); }
int so_should_early_stop(shardopt_optimizer opt, int vote) {
    int stop = 0;
    SO_TRY(shardopt_optimizer_should_early_stop(opt, vote, &stop), 0);
    return stop;
}
/* Bytes this rank has moved over the optimizer's communicators so far (not collective). */
uint64_t so_bytes_sent(shardopt_optimizer opt) {
    uint64_t n = 0;
    SO_TRY(shardopt_optimizer_bytes_sent(opt, &n), 0);
    return n;
}
void so_memory_stats(shardopt_optimizer opt, shardopt_memory_stats *stats) {
    if (stats) stats->struct_size = sizeof *stats;
    SO_TRY(shardopt_optimizer_memory_stats(opt, stats), SO_VOID);
}

%}

/* ---- checkpoints (collective: every rank calls with the same arguments) ----
 * serialize is two calls so each language allocates its own byte array: so_serialize keeps the
 * library's buffer in a per-thread slot and returns its size; so_serialized_take copies it into
 * the caller's memory and frees it (so_serialized_discard frees it without copying). */
%{
static __thread void *so_ser_data;
static __thread size_t so_ser_size;
%}
%inline %{
void so_serialized_discard(void) {
    void *d = so_ser_data;
    so_ser_data = NULL;
    so_ser_size = 0;
    if (d) shardopt_buffer_free(d);
}
size_t so_serialize(shardopt_optimizer opt) {
    void *d = NULL;
    size_t n = 0;
    so_serialized_discard();
    SO_TRY(shardopt_optimizer_serialize(opt, &d, &n), 0);
    so_ser_data = d;
    so_ser_size = n;
    return n;
}
void so_serialized_take(void *WBUF, size_t n) {
    if (!so_ser_data) {
        so_fail(SHARDOPT_ERR_INVALID_STATE, "nothing serialized on this thread (call so_serialize first)");
        return;
    }
    if (!WBUF || n != so_ser_size) {
        so_fail(SHARDOPT_ERR_INVALID_ARGUMENT, "the buffer must hold exactly the %zu serialized bytes (got %zu%s)",
                so_ser_size, n, WBUF ? "" : ", NULL");
        so_serialized_discard();
        return;
    }
    memcpy(WBUF, so_ser_data, n);
    so_serialized_discard();
}
void so_deserialize(shardopt_optimizer opt, const void *RBUF, size_t n) {
    SO_TRY(shardopt_optimizer_deserialize(opt, RBUF, n), SO_VOID);
}
/* consolidated != 0: rank 0 writes one file (+ model.safetensors); else every rank its shard */
void so_save(shardopt_optimizer opt, const char *dir, int consolidated) {
    SO_TRY(shardopt_optimizer_save(opt, dir, consolidated ? SHARDOPT_CHECKPOINT_CONSOLIDATED : SHARDOPT_CHECKPOINT_SHARDED),
           SO_VOID);
}
void so_load(shardopt_optimizer opt, const char *dir) { SO_TRY(shardopt_optimizer_load(opt, dir), SO_VOID); }

/* ---- elastic training (collective where the C ABI is) ---- */
/* checkpoint_dir NULL or "": $SHARDOPT_CHECKPOINT_DIR; 0 for the others: their defaults */
void so_make_elastic(shardopt_optimizer opt, int min_workers, int max_workers, int checkpoint_every,
                     const char *checkpoint_dir) {
    shardopt_elastic_options e;
    SO_TRY(shardopt_elastic_options_init(&e), SO_VOID);
    e.min_workers = min_workers;
    e.max_workers = max_workers;
    e.checkpoint_every = checkpoint_every;
    e.checkpoint_dir = checkpoint_dir;
    SO_TRY(shardopt_optimizer_make_elastic(opt, &e), SO_VOID);
}
void so_elastic_status(shardopt_optimizer opt, shardopt_elastic_status *status) {
    if (status) status->struct_size = sizeof *status;
    SO_TRY(shardopt_optimizer_elastic_status(opt, status), SO_VOID);
}
/* The checkpoint directory in force (a copy: valid as long as the optimizer is). */
const char *so_elastic_dir(shardopt_optimizer opt) {
    shardopt_elastic_status st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    SO_TRY(shardopt_optimizer_elastic_status(opt, &st), NULL);
    return st.checkpoint_dir;
}
void so_checkpoint_now(shardopt_optimizer opt) { SO_TRY(shardopt_optimizer_checkpoint_now(opt), SO_VOID); }
void so_finish_checkpoint(shardopt_optimizer opt) { SO_TRY(shardopt_optimizer_finish_checkpoint(opt), SO_VOID); }
%}

/* ---- optimize(): one entry per language ---- */
%{
static int so_optimize_common(shardopt_optimizer opt, shardopt_model_fn fn, void *user,
                              const shardopt_optimize_options *options, shardopt_optimize_result *result,
                              void *best, size_t best_count, void *history, size_t history_capacity) {
    if (result) {
        result->struct_size = sizeof *result;
        result->best_parameters = best;
        result->best_parameters_count = best ? best_count : 0;
        result->loss_history = (double *)history;
        result->loss_history_capacity = history ? history_capacity : 0;
    }
    return shardopt_optimizer_optimize(opt, fn, user, options, result);
}
#define SO_OPTIMIZE_FINISH(st)                                                        \
    do {                                                                              \
        if (result) { result->best_parameters = NULL; result->loss_history = NULL; }  \
        if ((st) != SHARDOPT_OK) {                                                    \
            if (so_foreign_pending) so_err_status = SO_ERR_FOREIGN;                   \
            else so_fail((st), "%s", shardopt_last_error_message());                  \
        }                                                                             \
    } while (0)
%}

%inline %{
/* FNPTR: a shardopt_model_fn (Marshal.GetFunctionPointerForDelegate); the layer keeps and
 * rethrows the delegate's own exception. */
void so_optimize_fn(shardopt_optimizer opt, void *FNPTR, void *USERDATA, const shardopt_optimize_options *options,
                    shardopt_optimize_result *result, void *best, size_t best_count, void *history,
                    size_t history_capacity) {
    shardopt_status st = so_optimize_common(opt, (shardopt_model_fn)FNPTR, USERDATA, options, result, best,
                                            best_count, history, history_capacity);
#define so_foreign_pending 0
    SO_OPTIMIZE_FINISH(st);
#undef so_foreign_pending
}

/* C#-only helpers (the C ABI calls the shared section does not wrap yet). */
/* Called by the layer's model trampoline on the rank's thread before it returns non-zero, so every
 * rank's error names this rank and the exception ("System.FormatException: ..."). */
void so_cs_model_error(const char *message) { shardopt_model_error(message); }
%}

/* Pipeline parallelism: stage callbacks and the runner (pipeline.i). */
/* pipeline.i — pipeline parallelism for the bindings (included at the end of shardopt.i, whose
 * helpers, typemaps and per-language exception plumbing it uses). Over the C ABI's experimental
 * shardopt_pipeline_* (docs/pipeline.md):
 *  - so_pipeline_create_py / _java / _fn: a pipeline whose stage callbacks are a language's
 *    (Python callables, a Java bridge object, C# delegates' function pointers), each called
 *    through a C trampoline here that records the call being served in a thread-local context;
 *  - so_stage_output / so_stage_grad / so_stage_parameters, callable from inside a callback only
 *    (that context says which call): set the forward's output activation (copied in), and view
 *    the gradient sum and parameters of one of the stage's tensors;
 *  - so_pipeline_run: one batch into so_pipeline_result; a language exception raised by one of
 *    this thread's callbacks is re-raised as itself (as optimize does), other ranks get the
 *    library's error naming it;
 *  - so_pipeline_destroy: the pipeline and the language references it held.
 */

%{
/* The callback being served on this thread: what so_stage_output/so_stage_grad act on. */
typedef struct so_stage_ctx {
    const shardopt_stage_call *call;
    shardopt_activation output; /* forward only */
    shardopt_optimizer opt;
    size_t element_size;
} so_stage_ctx;
static __thread so_stage_ctx *so_stage_now;

/* A pipeline and the language state its callbacks use (freed after the pipeline). */
typedef struct so_pipeline_s {
    shardopt_pipeline pipe;
    void *stage;
    void (*free_stage)(void *stage);
} so_pipeline_s;

/* The one batch's outcome (shardopt_pipeline_result without struct_size). */
typedef struct so_pipeline_result {
    double loss;
    int step_applied;
    double busy_seconds;
    double wait_seconds;
    double span_seconds;
    double bubble_fraction;
    int peak_activations;
    int sends;
    int recvs;
} so_pipeline_result;

static so_pipeline_s *so_pipeline_make(shardopt_optimizer opt, shardopt_stage_forward_fn forward,
                                       shardopt_stage_backward_fn backward, void *stage, void (*free_stage)(void *),
                                       int micro_batches, int schedule, int virtual_stages) {
    shardopt_pipeline_stage s;
    shardopt_pipeline_options o;
    so_pipeline_s *p = (so_pipeline_s *)calloc(1, sizeof *p);
    shardopt_status st;
    if (!p) {
        free_stage(stage);
        so_fail(SHARDOPT_ERR_OUT_OF_MEMORY, "no memory for a pipeline");
        return NULL;
    }
    s.struct_size = sizeof s;
    s.forward = forward;
    s.backward = backward;
    s.user_data = stage;
    o.struct_size = sizeof o;
    o.num_micro_batches = micro_batches;
    o.schedule = (shardopt_pipeline_schedule)schedule;
    o.virtual_stages = virtual_stages;
    st = shardopt_pipeline_create(opt, &s, &o, &p->pipe);
    if (st != SHARDOPT_OK) {
        so_fail(st, "%s", shardopt_last_error_message());
        free_stage(stage);
        free(p);
        return NULL;
    }
    p->stage = stage;
    p->free_stage = free_stage;
    return p;
}

/* The context a trampoline installs around its language call (nested calls keep the outer one). */
#define SO_STAGE_ENTER(ctx_, call_, output_, opt_, elem_)                                    \
    so_stage_ctx ctx_ = {(call_), (output_), (opt_), (elem_)};                                \
    so_stage_ctx *so_stage_saved_ = so_stage_now;                                             \
    so_stage_now = &ctx_
#define SO_STAGE_LEAVE() so_stage_now = so_stage_saved_

static so_stage_ctx *so_stage_context(const char *what) {
    if (!so_stage_now) {
        so_fail(SHARDOPT_ERR_INVALID_STATE, "%s: only inside a pipeline stage's forward or backward (on its thread)", what);
        return NULL;
    }
    return so_stage_now;
}

/* NewDirectByteBuffer and the language views need an address even for 0 elements. */
static unsigned char so_stage_empty[8];
#define SO_STAGE_ADDR(p_) ((p_) ? (void *)(p_) : (void *)so_stage_empty)
%}

/* ---- per-language trampolines ---- */
%{
/* The C# layer's delegates: the C ABI's callbacks without user_data and the call struct. */
typedef int (*so_cs_forward_fn)(int micro_batch, int chunk, int model_chunk, int first, int last, const void *input,
                                size_t input_count, double *loss);
typedef int (*so_cs_backward_fn)(int micro_batch, int chunk, int model_chunk, int first, int last, const void *input,
                                 size_t input_count, const void *output_grad, size_t output_grad_count,
                                 void *input_grad);
typedef struct so_cs_stage {
    so_cs_forward_fn forward;
    so_cs_backward_fn backward;
    shardopt_optimizer opt;
    size_t element_size;
} so_cs_stage;

static void so_cs_stage_free(void *p) { free(p); }

static int so_cs_stage_forward(void *user, const shardopt_stage_call *call, const void *input, size_t input_count,
                               shardopt_activation output, double *loss) {
    so_cs_stage *s = (so_cs_stage *)user;
    int rc;
    SO_STAGE_ENTER(ctx, call, output, s->opt, s->element_size);
    rc = s->forward(call->micro_batch, call->chunk, call->model_chunk, call->first, call->last, SO_STAGE_ADDR(input),
                    input_count, loss);
    SO_STAGE_LEAVE();
    return rc;
}

static int so_cs_stage_backward(void *user, const shardopt_stage_call *call, const void *input, size_t input_count,
                                const void *output_grad, size_t output_grad_count, void *input_grad) {
    so_cs_stage *s = (so_cs_stage *)user;
    int rc;
    SO_STAGE_ENTER(ctx, call, NULL, s->opt, s->element_size);
    rc = s->backward(call->micro_batch, call->chunk, call->model_chunk, call->first, call->last, SO_STAGE_ADDR(input),
                     input_count, SO_STAGE_ADDR(output_grad), output_grad_count, SO_STAGE_ADDR(input_grad));
    SO_STAGE_LEAVE();
    return rc;
}
/* The layer keeps and rethrows its delegates' exceptions itself. */
#define SO_STAGE_FOREIGN_PENDING() 0
%}
%apply void *VOID_INT_PTR { void *FORWARD_FN, void *BACKWARD_FN }
%inline %{
/* FORWARD_FN / BACKWARD_FN: Marshal.GetFunctionPointerForDelegate of the layer's delegates, which
 * must stay alive as long as the pipeline. */
so_pipeline_s *so_pipeline_create_fn(shardopt_optimizer opt, void *FORWARD_FN, void *BACKWARD_FN, size_t element_size,
                                     int micro_batches, int schedule, int virtual_stages) {
    so_cs_stage *s;
    if (!FORWARD_FN || !BACKWARD_FN) {
        so_fail(SHARDOPT_ERR_INVALID_ARGUMENT, "the pipeline stage callbacks are NULL");
        return NULL;
    }
    s = (so_cs_stage *)calloc(1, sizeof *s);
    if (!s) {
        so_fail(SHARDOPT_ERR_OUT_OF_MEMORY, "no memory for a pipeline stage");
        return NULL;
    }
    s->forward = (so_cs_forward_fn)FORWARD_FN;
    s->backward = (so_cs_backward_fn)BACKWARD_FN;
    s->opt = opt;
    s->element_size = element_size;
    return so_pipeline_make(opt, so_cs_stage_forward, so_cs_stage_backward, s, so_cs_stage_free, micro_batches,
                            schedule, virtual_stages);
}
/* The forward's output activation: `count` elements copied from the layer's pinned array. */
void so_stage_output(const void *RBUF, size_t count) {
    void *dst = NULL;
    so_stage_ctx *c = so_stage_context("so_stage_output");
    if (!c) return;
    if (!c->output) {
        so_fail(SHARDOPT_ERR_INVALID_STATE, "a backward has no output activation");
        return;
    }
    if (!RBUF && count) {
        so_fail(SHARDOPT_ERR_INVALID_ARGUMENT, "the output is null");
        return;
    }
    SO_TRY(shardopt_activation_resize(c->output, count, &dst), SO_VOID);
    if (count) memcpy(dst, RBUF, count * c->element_size);
}
%}

/* ---- shared by every language ---- */
typedef struct so_pipeline_result {
    double loss;
    int step_applied;
    double busy_seconds;
    double wait_seconds;
    double span_seconds;
    double bubble_fraction;
    int peak_activations;
    int sends;
    int recvs;
} so_pipeline_result;

%inline %{
/* One batch, collective over the optimizer's world. */
void so_pipeline_run(so_pipeline_s *pipeline, so_pipeline_result *result) {
    shardopt_pipeline_result r;
    shardopt_status st;
    if (!pipeline || !pipeline->pipe) {
        so_fail(SHARDOPT_ERR_INVALID_ARGUMENT, "the pipeline is NULL (closed?)");
        return;
    }
    memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    st = shardopt_pipeline_run_batch(pipeline->pipe, &r);
    if (st != SHARDOPT_OK) {
        if (SO_STAGE_FOREIGN_PENDING()) so_err_status = SO_ERR_FOREIGN;
        else so_fail(st, "%s", shardopt_last_error_message());
        return;
    }
    so_err_status = 0; /* a callback may have caught an error of a helper it called */
    if (!result) return;
    result->loss = r.loss;
    result->step_applied = r.step_applied;
    result->busy_seconds = r.busy_seconds;
    result->wait_seconds = r.wait_seconds;
    result->span_seconds = r.span_seconds;
    result->bubble_fraction = r.bubble_fraction;
    result->peak_activations = r.peak_activations;
    result->sends = r.sends;
    result->recvs = r.recvs;
}

void so_pipeline_destroy(so_pipeline_s *pipeline) {
    if (!pipeline) return;
    if (pipeline->pipe) shardopt_pipeline_destroy(pipeline->pipe);
    if (pipeline->free_stage) pipeline->free_stage(pipeline->stage);
    free(pipeline);
}

/* Inside a callback: the running sum of tensor `tensor`'s gradient over the batch's micro-batches
 * (add this micro-batch's into it). */
so_bytes so_stage_grad(int tensor) {
    so_bytes r = {NULL, 0};
    size_t n = 0;
    so_stage_ctx *c = so_stage_context("so_stage_grad");
    if (!c) return r;
    SO_TRY(shardopt_stage_call_grad(c->call, tensor, &r.ptr, &n), r);
    r.bytes = n * c->element_size;
    return r;
}

/* Inside a callback: tensor `tensor`'s parameters (those of this rank's stage). */
so_bytes so_stage_parameters(int tensor) {
    so_bytes r = {NULL, 0};
    size_t n = 0;
    so_stage_ctx *c = so_stage_context("so_stage_parameters");
    if (!c) return r;
    SO_TRY(shardopt_optimizer_tensor_info(c->opt, tensor, &n, NULL), r);
    SO_TRY(shardopt_optimizer_tensor_parameters(c->opt, tensor, &r.ptr), r);
    r.bytes = n * c->element_size;
    return r;
}
%}

/* shardopt.h — the stable C ABI of shardopt: distributed and sharded optimizers (DDP, ZeRO-1/2,
 * FSDP, hybrid, Local SGD) and the collectives under them.
 *
 * Conventions (kept for the life of ABI version 1):
 *  - Objects are opaque handles with create/destroy pairs; destroy(NULL) is a no-op returning
 *    SHARDOPT_OK. A handle must not be used after it was destroyed.
 *  - Every function returns a shardopt_status (0 = SHARDOPT_OK) and writes outputs through
 *    pointers, except shardopt_version(), shardopt_abi_version(), shardopt_status_name() and
 *    shardopt_last_error_message(), which cannot fail. On failure, outputs are left unchanged
 *    and shardopt_last_error_message() describes the error on the calling thread.
 *  - No C++ exception crosses this boundary. A NULL handle or pointer, a bad dtype or op, a wrong
 *    size, a rank out of range or a call in the wrong state is reported as a status.
 *  - Options structs start with `size_t struct_size` and are filled with defaults by their
 *    shardopt_xxx_options_init(&opts); the library reads only the fields that fit in struct_size,
 *    so fields are only ever appended. Output structs also start with struct_size, which the
 *    caller sets (e.g. `shardopt_step_result r = {sizeof r};`); the library writes only the
 *    fields that fit.
 *  - Thread safety: distinct handles may be used from distinct threads at once (the N handles of
 *    an in-process group are meant to be driven from N threads). One handle, and the optimizer
 *    built over a communicator handle, must be used by one thread at a time.
 *  - Callbacks are a function pointer plus a `void *user_data` passed back unchanged.
 */
#ifndef SHARDOPT_H
#define SHARDOPT_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#  if defined(SHARDOPT_BUILDING_LIBRARY)
#    define SHARDOPT_API __declspec(dllexport)
#  else
#    define SHARDOPT_API __declspec(dllimport)
#  endif
#elif defined(__GNUC__)
#  define SHARDOPT_API __attribute__((visibility("default")))
#else
#  define SHARDOPT_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
 * Version
 * ------------------------------------------------------------------------------------------- */
#define SHARDOPT_VERSION_MAJOR 0
#define SHARDOPT_VERSION_MINOR 1
#define SHARDOPT_VERSION_PATCH 0
/* MAJOR*10000 + MINOR*100 + PATCH, as shardopt_version() returns it. */
#define SHARDOPT_VERSION_NUMBER \
    (SHARDOPT_VERSION_MAJOR * 10000 + SHARDOPT_VERSION_MINOR * 100 + SHARDOPT_VERSION_PATCH)
/* Incremented only on an incompatible ABI change (never, we hope). */
#define SHARDOPT_ABI_VERSION 1

/* Version of the loaded library, encoded like SHARDOPT_VERSION_NUMBER. Thread safe. */
SHARDOPT_API unsigned shardopt_version(void);
/* SHARDOPT_ABI_VERSION of the loaded library; compare with the header's to detect a mismatch. */
SHARDOPT_API unsigned shardopt_abi_version(void);

/* ---------------------------------------------------------------------------------------------
 * Status codes and errors (values are fixed forever)
 * ------------------------------------------------------------------------------------------- */
typedef enum shardopt_status {
    SHARDOPT_OK = 0,
    SHARDOPT_ERR_INVALID_ARGUMENT = 1, /* NULL pointer/handle, bad size, dtype, op, rank, option */
    SHARDOPT_ERR_INVALID_STATE = 2,    /* call not allowed now, or aborted communicator */
    SHARDOPT_ERR_TIMEOUT = 3,          /* a peer did not arrive within the timeout */
    SHARDOPT_ERR_MISMATCH = 4,         /* ranks issued different collectives or shapes */
    SHARDOPT_ERR_PEER_LOST = 5,        /* a peer process died or its connection broke */
    SHARDOPT_ERR_IO = 6,               /* file system error */
    SHARDOPT_ERR_CORRUPT = 7,          /* a file or network frame failed validation */
    SHARDOPT_ERR_OUT_OF_MEMORY = 8,    /* allocation failed */
    SHARDOPT_ERR_UNSUPPORTED = 9,      /* feature or backend not built in / not available */
    SHARDOPT_ERR_INTERNAL = 10         /* a bug in shardopt */
} shardopt_status;

/* Static name of a status ("SHARDOPT_ERR_TIMEOUT"); "SHARDOPT_ERR_UNKNOWN" for other values. */
SHARDOPT_API const char *shardopt_status_name(shardopt_status status);
/* What the most recent failed call on this thread reported, in words ("" if none). The string
 * belongs to the library and stays valid until the next failing call on this thread. */
SHARDOPT_API const char *shardopt_last_error_message(void);

/* ---------------------------------------------------------------------------------------------
 * Element types and reduction operators (values are fixed forever)
 * ------------------------------------------------------------------------------------------- */
typedef enum shardopt_dtype {
    SHARDOPT_F32 = 0, SHARDOPT_F64 = 1, SHARDOPT_F16 = 2, SHARDOPT_BF16 = 3,
    SHARDOPT_I32 = 4, SHARDOPT_I64 = 5, SHARDOPT_U8 = 6
} shardopt_dtype;

typedef enum shardopt_reduce_op {
    SHARDOPT_SUM = 0, SHARDOPT_AVG = 1, SHARDOPT_MIN = 2, SHARDOPT_MAX = 3, SHARDOPT_PROD = 4
} shardopt_reduce_op;

/* ---------------------------------------------------------------------------------------------
 * Communicators
 * ------------------------------------------------------------------------------------------- */
typedef struct shardopt_comm_s *shardopt_comm;
typedef struct shardopt_work_s *shardopt_work;

/* Creates the `size` communicators of one in-process group (ranks are threads of this process)
 * into comms[0..size): comms[r] is rank r; drive each from its own thread and destroy each.
 * Errors: INVALID_ARGUMENT (size < 1, comms NULL), OUT_OF_MEMORY. */
SHARDOPT_API shardopt_status shardopt_comm_create_inprocess(int size, shardopt_comm *comms);
/* Creates this process's communicator from the environment (SHARDOPT_RANK, SHARDOPT_WORLD_SIZE,
 * torchrun, Open MPI or Slurm variables). backend: "inprocess" (a world of one rank; error if
 * SHARDOPT_WORLD_SIZE > 1), "ucx", "nccl", "staged", or NULL for $SHARDOPT_BACKEND, else
 * "inprocess". With ucx, nccl and staged every rank of the job calls it (they meet in a
 * rendezvous, bounded by the job's timeout).
 *   "nccl"   collectives on CUDA device buffers over NCCL, one GPU per rank. libnccl is not
 *            linked: it is opened on first use (libnccl.so.2, or $SHARDOPT_NCCL_LIBRARY).
 *   "staged" collectives on CUDA device buffers staged through pinned host memory over UCX (for
 *            several ranks per GPU, or hosts without NCCL).
 * A GPU rank uses device (local rank % device count) when the launcher gives a local rank, else
 * the calling thread's current CUDA device. Collectives of a GPU communicator take device
 * pointers (staged also managed or host memory) and run on its CUDA stream (see
 * shardopt_comm_set_cuda_stream); a blocking call returns once the operation completed on the
 * device. A backend is only ever the one named: none is a fallback for another.
 * Errors: UNSUPPORTED (backend not built in; for nccl/staged also: NCCL cannot be loaded or no
 * CUDA device is usable; the message says which), INVALID_ARGUMENT (unknown backend, bad env,
 * out NULL), TIMEOUT / PEER_LOST (the rendezvous did not complete). */
SHARDOPT_API shardopt_status shardopt_comm_create_from_env(const char *backend, shardopt_comm *comm);
/* Collective over comm: ranks with equal color form a new communicator ordered by (key, rank);
 * color < 0 yields *out = NULL. The new handle is the caller's to destroy. */
SHARDOPT_API shardopt_status shardopt_comm_split(shardopt_comm comm, int color, int key, shardopt_comm *out);
/* Releases the handle. Optimizers created over it keep the communicator alive. NULL: no-op. */
SHARDOPT_API shardopt_status shardopt_comm_destroy(shardopt_comm comm);

/* This handle's rank in [0, size) and the group size. Errors: INVALID_ARGUMENT (NULL). */
SHARDOPT_API shardopt_status shardopt_comm_rank(shardopt_comm comm, int *rank);
SHARDOPT_API shardopt_status shardopt_comm_size(shardopt_comm comm, int *size);
/* Timeout of every later blocking call and wait, in milliseconds (> 0). */
SHARDOPT_API shardopt_status shardopt_comm_set_timeout(shardopt_comm comm, int64_t timeout_ms);
/* GPU communicators (nccl, staged, or split from one): enqueue this communicator's collectives on
 * `stream` (a cudaStream_t of its device, in the primary context) from now on, so they are
 * ordered after the caller's work on it; NULL goes back to the communicator's own non-blocking
 * stream. Call it between operations, not while async operations are in flight on the old
 * stream. Errors: INVALID_ARGUMENT (NULL handle, or a communicator without a device). */
SHARDOPT_API shardopt_status shardopt_comm_set_cuda_stream(shardopt_comm comm, void *stream);
/* Aborts the communicator: pending and later calls fail with `reason` (in-process: on every rank
 * of the group, so peers fail fast when one thread gives up). reason may be NULL. */
SHARDOPT_API shardopt_status shardopt_comm_abort(shardopt_comm comm, const char *reason);

/* Blocking collectives. Every rank calls the same collectives in the same order with the same
 * count, dtype, op and root; `send` and `recv` may be the same pointer. count is in elements.
 * Errors: INVALID_ARGUMENT (NULL buffer, bad dtype/op, root or peer out of range), TIMEOUT,
 * MISMATCH (reported on every rank), PEER_LOST, INVALID_STATE (aborted communicator). */
/* recv[i] = op over ranks of send[i], i < count. */
SHARDOPT_API shardopt_status shardopt_allreduce(shardopt_comm comm, const void *send, void *recv, size_t count,
                                                shardopt_dtype dtype, shardopt_reduce_op op);
/* send holds size*recv_count elements; recv = op over ranks of send[rank*recv_count ...]. */
SHARDOPT_API shardopt_status shardopt_reduce_scatter(shardopt_comm comm, const void *send, void *recv,
                                                     size_t recv_count, shardopt_dtype dtype, shardopt_reduce_op op);
/* recv (size*send_count elements) = every rank's send, in rank order. */
SHARDOPT_API shardopt_status shardopt_allgather(shardopt_comm comm, const void *send, void *recv, size_t send_count,
                                                shardopt_dtype dtype);
SHARDOPT_API shardopt_status shardopt_broadcast(shardopt_comm comm, void *buffer, size_t count, shardopt_dtype dtype,
                                                int root);
/* Like allreduce, but only root's recv is written (recv may be NULL on other ranks). */
SHARDOPT_API shardopt_status shardopt_reduce(shardopt_comm comm, const void *send, void *recv, size_t count,
                                             shardopt_dtype dtype, shardopt_reduce_op op, int root);
SHARDOPT_API shardopt_status shardopt_barrier(shardopt_comm comm);
/* Point to point; send is buffered. tag >= 0. */
SHARDOPT_API shardopt_status shardopt_send(shardopt_comm comm, const void *buffer, size_t count, shardopt_dtype dtype,
                                           int peer, int tag);
SHARDOPT_API shardopt_status shardopt_recv(shardopt_comm comm, void *buffer, size_t count, shardopt_dtype dtype,
                                           int peer, int tag);

/* Asynchronous forms: issue now and return a work handle in *work; the buffers must stay alive
 * and untouched until the work completes. Argument errors are returned at once (no handle);
 * errors while running are returned by shardopt_work_wait. */
SHARDOPT_API shardopt_status shardopt_allreduce_async(shardopt_comm comm, const void *send, void *recv, size_t count,
                                                      shardopt_dtype dtype, shardopt_reduce_op op, shardopt_work *work);
SHARDOPT_API shardopt_status shardopt_reduce_scatter_async(shardopt_comm comm, const void *send, void *recv,
                                                           size_t recv_count, shardopt_dtype dtype,
                                                           shardopt_reduce_op op, shardopt_work *work);
SHARDOPT_API shardopt_status shardopt_allgather_async(shardopt_comm comm, const void *send, void *recv,
                                                      size_t send_count, shardopt_dtype dtype, shardopt_work *work);
SHARDOPT_API shardopt_status shardopt_broadcast_async(shardopt_comm comm, void *buffer, size_t count,
                                                      shardopt_dtype dtype, int root, shardopt_work *work);
SHARDOPT_API shardopt_status shardopt_reduce_async(shardopt_comm comm, const void *send, void *recv, size_t count,
                                                   shardopt_dtype dtype, shardopt_reduce_op op, int root,
                                                   shardopt_work *work);
SHARDOPT_API shardopt_status shardopt_barrier_async(shardopt_comm comm, shardopt_work *work);
SHARDOPT_API shardopt_status shardopt_send_async(shardopt_comm comm, const void *buffer, size_t count,
                                                 shardopt_dtype dtype, int peer, int tag, shardopt_work *work);
SHARDOPT_API shardopt_status shardopt_recv_async(shardopt_comm comm, void *buffer, size_t count, shardopt_dtype dtype,
                                                 int peer, int tag, shardopt_work *work);

/* Blocks until the work finished; returns its status (again on every later call). Any thread. */
SHARDOPT_API shardopt_status shardopt_work_wait(shardopt_work work);
/* *done = 1 once the work finished (successfully or not), else 0; never blocks. */
SHARDOPT_API shardopt_status shardopt_work_test(shardopt_work work, int *done);
/* Releases the handle. Does not cancel: an unfinished operation still completes, so its buffers
 * must stay alive until then (wait first). NULL: no-op. */
SHARDOPT_API shardopt_status shardopt_work_destroy(shardopt_work work);

/* ---------------------------------------------------------------------------------------------
 * Base optimizer options (formulas and defaults follow torch.optim)
 * ------------------------------------------------------------------------------------------- */
typedef enum shardopt_optimizer_kind {
    SHARDOPT_SGD = 0, SHARDOPT_ADAM = 1, SHARDOPT_ADAMW = 2, SHARDOPT_RMSPROP = 3, SHARDOPT_ADAGRAD = 4,
    SHARDOPT_LAMB = 5
} shardopt_optimizer_kind;

typedef struct shardopt_optimizer_options {
    size_t struct_size;            /* sizeof(shardopt_optimizer_options), set by _init */
    shardopt_optimizer_kind kind;  /* default SHARDOPT_ADAM */
    double lr;
    double weight_decay;           /* L2 for SGD/Adam/RMSprop/Adagrad, decoupled for AdamW/LAMB */
    int32_t maximize;
    double momentum;               /* SGD, RMSprop */
    double dampening;              /* SGD */
    int32_t nesterov;              /* SGD */
    double beta1, beta2, eps;      /* Adam, AdamW, LAMB (eps also RMSprop, Adagrad) */
    int32_t amsgrad;               /* Adam, AdamW */
    double alpha;                  /* RMSprop */
    int32_t centered;              /* RMSprop */
    double lr_decay;               /* Adagrad */
    double initial_accumulator_value; /* Adagrad */
} shardopt_optimizer_options;

/* Fills the first struct_size bytes of *opts with torch.optim's defaults for `kind` and sets
 * opts->struct_size = struct_size. Prefer the inline wrappers below. Errors: INVALID_ARGUMENT
 * (opts NULL, struct_size too small, unknown kind). */
SHARDOPT_API shardopt_status shardopt_optimizer_options_init_sized(shardopt_optimizer_options *opts,
                                                                   size_t struct_size, shardopt_optimizer_kind kind);
/* Defaults for Adam. */
static inline shardopt_status shardopt_optimizer_options_init(shardopt_optimizer_options *opts) {
    return shardopt_optimizer_options_init_sized(opts, sizeof *opts, SHARDOPT_ADAM);
}
/* Defaults for `kind` (LAMB: lr 1e-3, eps 1e-6). */
static inline shardopt_status shardopt_optimizer_options_defaults(shardopt_optimizer_kind kind,
                                                                  shardopt_optimizer_options *opts) {
    return shardopt_optimizer_options_init_sized(opts, sizeof *opts, kind);
}

/* ---------------------------------------------------------------------------------------------
 * Parameter sets: the tensors of a model, laid out in one flat buffer and cut into buckets
 * ------------------------------------------------------------------------------------------- */
typedef struct shardopt_params_s *shardopt_params;

/* dtype: SHARDOPT_F32 or SHARDOPT_F64. bucket_bytes: largest gradient bucket, 0 = 25 MiB. */
SHARDOPT_API shardopt_status shardopt_params_create(shardopt_dtype dtype, size_t bucket_bytes, shardopt_params *out);
/* A parameter set is a plain description, not collective; destroy any time after create. */
SHARDOPT_API shardopt_status shardopt_params_destroy(shardopt_params params);
/* Appends a tensor of `count` elements (name unique, non-empty; count > 0). tp_replicated: hybrid,
 * same values on every tensor-parallel rank. *index (may be NULL) receives its index. */
SHARDOPT_API shardopt_status shardopt_params_add(shardopt_params params, const char *name, size_t count,
                                                 int tp_replicated, int *index);
/* Closes the current bucket: the next tensor starts a new one (an FSDP unit boundary). */
SHARDOPT_API shardopt_status shardopt_params_end_bucket(shardopt_params params);
/* Tensors registered so far. Errors: INVALID_ARGUMENT (NULL). */
SHARDOPT_API shardopt_status shardopt_params_tensor_count(shardopt_params params, int *count);
/* Real parameter elements (the packed length used by get/set_parameters and optimize). */
SHARDOPT_API shardopt_status shardopt_params_element_count(shardopt_params params, size_t *count);
/* Flat buffer length when sharded over `shards` ranks: what shardopt_optimizer_create_external
 * needs (shards = the communicator size for DDP and ZeRO). */
SHARDOPT_API shardopt_status shardopt_params_padded_count(shardopt_params params, int shards, size_t *count);

/* ---------------------------------------------------------------------------------------------
 * Sharded optimizers
 * ------------------------------------------------------------------------------------------- */
typedef enum shardopt_strategy {
    SHARDOPT_DDP = 0, SHARDOPT_ZERO1 = 1, SHARDOPT_ZERO2 = 2, SHARDOPT_FSDP = 3, SHARDOPT_HYBRID = 4,
    SHARDOPT_LOCAL_SGD = 5
} shardopt_strategy;

typedef struct shardopt_sharding_options {
    size_t struct_size;                  /* set by _init */
    shardopt_strategy strategy;          /* default SHARDOPT_DDP */
    int32_t gradient_accumulation_steps; /* micro-steps summed before one update (mean); 1 */
    double max_grad_norm;                /* global-norm clipping across shards; 0 = off */
    int32_t skip_nonfinite;              /* skip the update everywhere on NaN/Inf grads; 1 */
    int32_t staging_buffers;             /* ZeRO-2/FSDP bucket staging buffers; 1 */
    int32_t fsdp_prefetch;               /* FSDP: gather(u) prefetches unit u+1; 1 */
    int32_t pipeline_parallel_size;      /* hybrid grid; 1 */
    int32_t tensor_parallel_size;        /* hybrid grid; 1 */
    int32_t data_parallel_size;          /* hybrid grid; -1 = the rest of the world */
    shardopt_strategy hybrid_data_strategy; /* inside each data group: DDP/ZERO1/ZERO2/FSDP; ZERO2 */
    int32_t hsdp_replicas;               /* hybrid with FSDP: replicated sub-groups; 1 */
    int32_t local_sgd_period;            /* Local SGD: average parameters every H steps; 4 */
} shardopt_sharding_options;

/* Fills *opts with the defaults noted above (struct_size as given); prefer the inline _init.
 * Errors: INVALID_ARGUMENT (NULL, struct_size too small). */
SHARDOPT_API shardopt_status shardopt_sharding_options_init_sized(shardopt_sharding_options *opts, size_t struct_size);
static inline shardopt_status shardopt_sharding_options_init(shardopt_sharding_options *opts) {
    return shardopt_sharding_options_init_sized(opts, sizeof *opts);
}

typedef struct shardopt_optimizer_s *shardopt_optimizer;

/* Collective over comm: creates this rank's sharded optimizer with library-owned memory. The
 * layout of `params` is copied (params may be destroyed afterwards). `initial` (packed,
 * element_count elements of the set's dtype) may be NULL for zeros and must be equal on every
 * rank. Errors: INVALID_ARGUMENT (NULL, invalid options: the message names the field), MISMATCH,
 * UNSUPPORTED, OUT_OF_MEMORY. */
SHARDOPT_API shardopt_status shardopt_optimizer_create(shardopt_comm comm, shardopt_params params,
                                                       const shardopt_optimizer_options *optimizer,
                                                       const shardopt_sharding_options *sharding,
                                                       const void *initial, shardopt_optimizer *out);
/* Like create, but the parameters live in the caller's buffer of `param_count` elements, which
 * must equal shardopt_params_padded_count(params, comm size) and outlive the optimizer
 * (zero copy). DDP, ZeRO-1, ZeRO-2 and Local SGD only (FSDP and hybrid: UNSUPPORTED).
 * Errors also: INVALID_ARGUMENT (wrong param_count). */
SHARDOPT_API shardopt_status shardopt_optimizer_create_external(shardopt_comm comm, shardopt_params params,
                                                                const shardopt_optimizer_options *optimizer,
                                                                const shardopt_sharding_options *sharding,
                                                                const void *initial, void *param_buffer,
                                                                size_t param_count, shardopt_optimizer *out);
/* Not collective. NULL: no-op. */
SHARDOPT_API shardopt_status shardopt_optimizer_destroy(shardopt_optimizer opt);

/* Layout queries (counts in elements); any thread that owns the handle, never collective.
 * Errors: INVALID_ARGUMENT (NULL handle or output, tensor/bucket index out of range). */
SHARDOPT_API shardopt_status shardopt_optimizer_tensor_count(shardopt_optimizer opt, int *count);
/* Elements of tensor t and the bucket (FSDP unit) holding it; either output may be NULL. */
SHARDOPT_API shardopt_status shardopt_optimizer_tensor_info(shardopt_optimizer opt, int tensor, size_t *count,
                                                            int *bucket);
SHARDOPT_API shardopt_status shardopt_optimizer_bucket_count(shardopt_optimizer opt, int *count);
/* Elements used by tensors in bucket b (the packed length of its gradient). */
SHARDOPT_API shardopt_status shardopt_optimizer_bucket_info(shardopt_optimizer opt, int bucket, size_t *count);
/* Packed element count (sum of tensor counts) and flat padded length; either may be NULL. */
SHARDOPT_API shardopt_status shardopt_optimizer_element_count(shardopt_optimizer opt, size_t *count,
                                                              size_t *padded_count);
/* Learning rate of later steps (schedules); set the same on every rank. INVALID_ARGUMENT if < 0. */
SHARDOPT_API shardopt_status shardopt_optimizer_set_learning_rate(shardopt_optimizer opt, double lr);
/* Updates applied so far (accumulation micro-steps and skipped steps not counted). */
SHARDOPT_API shardopt_status shardopt_optimizer_step_count(shardopt_optimizer opt, int64_t *steps);

/* Parameters. Pointers returned stay owned by the optimizer. */
/* The full flat buffer (padded_count elements). FSDP: INVALID_STATE (sharded at rest). */
SHARDOPT_API shardopt_status shardopt_optimizer_parameters(shardopt_optimizer opt, void **params);
/* Parameters of tensor t; FSDP only while its unit is gathered (else INVALID_STATE). */
SHARDOPT_API shardopt_status shardopt_optimizer_tensor_parameters(shardopt_optimizer opt, int tensor, void **params);
/* Packed copy of all parameters into `packed` of `count` elements (= element_count, else
 * INVALID_ARGUMENT). Collective for FSDP and hybrid. */
SHARDOPT_API shardopt_status shardopt_optimizer_get_parameters(shardopt_optimizer opt, void *packed, size_t count);
/* Replace all parameters from packed (count = element_count), identical on every rank. */
SHARDOPT_API shardopt_status shardopt_optimizer_set_parameters(shardopt_optimizer opt, const void *packed,
                                                               size_t count);
/* FSDP: makes unit (bucket) b's full parameters available (collective over the group) and
 * returns them in *params (may be NULL); release frees them. Others: the resident pointer. */
SHARDOPT_API shardopt_status shardopt_optimizer_gather(shardopt_optimizer opt, int bucket, void **params);
SHARDOPT_API shardopt_status shardopt_optimizer_release(shardopt_optimizer opt, int bucket);

/* Step protocol, every rank the same sequence:
 *   zero_grad; for each bucket b: fill bucket_grad(b) or tensor_grad(t) of b's tensors, grad_ready(b); step.
 * grad_ready(b) starts b's reduction at once; buckets never marked ready are reduced by step. */
typedef struct shardopt_step_result {
    size_t struct_size;        /* set by the caller: sizeof(shardopt_step_result) */
    int32_t applied;           /* an optimizer update happened */
    int32_t skipped_nonfinite; /* NaN/Inf gradients on some rank: update skipped everywhere */
    int32_t accumulating;      /* a gradient-accumulation micro-step: no update yet */
    double grad_norm;          /* global norm of the averaged gradient, before clipping */
} shardopt_step_result;

/* Starts a step: every bucket's gradient is closed and will read as zero until filled. */
SHARDOPT_API shardopt_status shardopt_optimizer_zero_grad(shardopt_optimizer opt);
/* Opens bucket b's gradient buffer (zeroed) and returns it; *count (may be NULL) = its packed
 * element count. Valid until the next step. */
SHARDOPT_API shardopt_status shardopt_optimizer_bucket_grad(shardopt_optimizer opt, int bucket, void **grad,
                                                            size_t *count);
/* Gradient of tensor t inside its (opened) bucket; *count (may be NULL) = its elements. */
SHARDOPT_API shardopt_status shardopt_optimizer_tensor_grad(shardopt_optimizer opt, int tensor, void **grad,
                                                            size_t *count);
/* Bucket b's gradient is complete: its reduction starts now (overlapping later buckets' work). */
SHARDOPT_API shardopt_status shardopt_optimizer_grad_ready(shardopt_optimizer opt, int bucket);
/* Collective: reduces the remaining buckets and updates (or only accumulates); result may be NULL.
 * Errors: INVALID_STATE (protocol misuse), INVALID_ARGUMENT (result->struct_size unset), and
 * those of the collectives. */
SHARDOPT_API shardopt_status shardopt_optimizer_step(shardopt_optimizer opt, shardopt_step_result *result);

/* Collective: replicated state made identical (from rank 0), sharded state checked (MISMATCH). */
SHARDOPT_API shardopt_status shardopt_optimizer_synchronize_state(shardopt_optimizer opt);
/* Collective: *stop = 1 on every rank when any rank voted non-zero. */
SHARDOPT_API shardopt_status shardopt_optimizer_should_early_stop(shardopt_optimizer opt, int vote, int *stop);

typedef struct shardopt_memory_stats {
    size_t struct_size;             /* set by the caller: sizeof(shardopt_memory_stats) */
    uint64_t params_bytes;          /* parameters held at rest */
    uint64_t grads_bytes;           /* gradients held (full or shard) */
    uint64_t optimizer_state_bytes; /* base optimizer state held */
    uint64_t buffer_bytes;          /* staging, gathered units, accumulation buffers now */
    uint64_t peak_buffer_bytes;     /* most buffer bytes held at once so far */
    uint64_t total_bytes;           /* params + grads + state + buffers */
} shardopt_memory_stats;

/* Bytes this rank holds now (not collective). stats->struct_size must be set by the caller. */
SHARDOPT_API shardopt_status shardopt_optimizer_memory_stats(shardopt_optimizer opt, shardopt_memory_stats *stats);

/* ---------------------------------------------------------------------------------------------
 * optimize(): the training loop over the step protocol
 * ------------------------------------------------------------------------------------------- */
/* Model callback: the mean loss over samples[0..sample_count) at `params` (packed, all tensors
 * in order) into *loss, and the mean gradient into `grad` (packed, zeroed on entry). Called on
 * every rank's thread with that rank's samples. Return 0 on success; any other value makes
 * optimize fail with SHARDOPT_ERR_INVALID_STATE and aborts the communicator so peers stop too. */
typedef int (*shardopt_model_fn)(void *user_data, const void *params, void *grad, const int64_t *samples,
                                 size_t sample_count, double *loss);

typedef struct shardopt_optimize_options {
    size_t struct_size;     /* set by _init */
    int64_t num_samples;    /* data set size (> 0), split across data-parallel ranks; 0 */
    int64_t batch_size;     /* global batch per step; 0 = the whole data set */
    int32_t epochs;         /* 1 */
    int64_t max_iterations; /* 0 = no limit beyond epochs */
    int32_t patience;       /* epochs without improvement before stopping; 0 = never */
    double min_delta;       /* smaller improvements do not count; 0 */
} shardopt_optimize_options;

/* Fills *opts with the defaults noted above; prefer the inline _init. Errors: INVALID_ARGUMENT. */
SHARDOPT_API shardopt_status shardopt_optimize_options_init_sized(shardopt_optimize_options *opts, size_t struct_size);
static inline shardopt_status shardopt_optimize_options_init(shardopt_optimize_options *opts) {
    return shardopt_optimize_options_init_sized(opts, sizeof *opts);
}

typedef struct shardopt_optimize_result {
    size_t struct_size;            /* set by the caller: sizeof(shardopt_optimize_result) */
    /* in: caller buffers (either may be NULL) */
    void *best_parameters;         /* receives the best packed parameters... */
    size_t best_parameters_count;  /* ...its capacity in elements: 0 or element_count */
    double *loss_history;          /* receives the mean loss of each epoch... */
    size_t loss_history_capacity;  /* ...up to this many */
    /* out */
    size_t loss_history_count;     /* epochs run (may exceed the capacity) */
    double best_loss;
    int64_t iterations;
    int32_t stopped_early;
} shardopt_optimize_result;

/* Collective: trains with `model` (see shardopt_model_fn) as options say. result may be NULL.
 * Errors: INVALID_ARGUMENT (NULL model/options, invalid options, wrong best_parameters_count),
 * INVALID_STATE (the callback failed, here or on a peer), and those of the collectives. */
SHARDOPT_API shardopt_status shardopt_optimizer_optimize(shardopt_optimizer opt, shardopt_model_fn model,
                                                         void *user_data, const shardopt_optimize_options *options,
                                                         shardopt_optimize_result *result);

/* ---------------------------------------------------------------------------------------------
 * Checkpoints. All four are collective over the optimizer's communicator: every rank calls them
 * with the same arguments. A checkpoint saved by any world size and strategy loads into any
 * other (resharding). Files are checksummed and written atomically; a failed load changes
 * nothing (SHARDOPT_ERR_IO: unreadable/unwritable path or missing shard; SHARDOPT_ERR_CORRUPT:
 * bad magic, future version, truncation, checksum; SHARDOPT_ERR_INVALID_ARGUMENT: a layout that
 * does not match; SHARDOPT_ERR_INVALID_STATE: saving in the middle of gradient accumulation).
 * ------------------------------------------------------------------------------------------- */
typedef enum shardopt_checkpoint_form {
    SHARDOPT_CHECKPOINT_SHARDED = 0,     /* every rank writes its shard; rank 0 the manifest last */
    SHARDOPT_CHECKPOINT_CONSOLIDATED = 1 /* rank 0 writes one file (+ model.safetensors) */
} shardopt_checkpoint_form;

/* Saves into directory `dir` (created if missing). */
SHARDOPT_API shardopt_status shardopt_optimizer_save(shardopt_optimizer opt, const char *dir,
                                                     shardopt_checkpoint_form form);
/* Loads the checkpoint in directory `dir`, of either form. */
SHARDOPT_API shardopt_status shardopt_optimizer_load(shardopt_optimizer opt, const char *dir);
/* The consolidated checkpoint as bytes, identical on every rank. *data is allocated by the
 * library and released with shardopt_buffer_free. */
SHARDOPT_API shardopt_status shardopt_optimizer_serialize(shardopt_optimizer opt, void **data, size_t *size);
/* Loads bytes produced by shardopt_optimizer_serialize (every rank passes the same bytes). */
SHARDOPT_API shardopt_status shardopt_optimizer_deserialize(shardopt_optimizer opt, const void *data, size_t size);
/* Frees a buffer the library allocated (NULL is a no-op). */
SHARDOPT_API shardopt_status shardopt_buffer_free(void *data);

/* ---------------------------------------------------------------------------------------------
 * Device optimizers: the sharded optimizer with its parameters, gradients, optimizer state and
 * staging buffers in CUDA device memory, over a GPU communicator (shardopt_comm_create_from_env
 * with "nccl" or "staged").
 *
 * Every shardopt_device_optimizer_X behaves as shardopt_optimizer_X above (same strategies,
 * options, step protocol, results, errors and checkpoint files; the same calls are collective),
 * except:
 *  - Every pointer it returns (parameters, tensor_parameters, gather, bucket_grad, tensor_grad)
 *    is CUDA device memory on the communicator's device: never dereference it on the host.
 *    Host memory is what `initial`, get_parameters/set_parameters, the optimize callback and
 *    the checkpoint calls take.
 *  - Parameter sets of dtype SHARDOPT_F32 only. LAMB only with DDP and Local SGD (where no
 *    tensor's update is split across ranks).
 *  - Streams: the optimizer enqueues its passes on the compute stream given to create (a
 *    cudaStream_t of the communicator's device; NULL = the legacy default stream).
 *    bucket_grad/tensor_grad clear the gradient on that stream: write the gradient there, or on
 *    a stream ordered after it. grad_ready(b) orders b's reduction after the work already on the
 *    compute stream and starts it at once, so it overlaps the gradients of later buckets. step
 *    waits for the reductions, reads the gradient norm back (result->grad_norm and the skip and
 *    clip decisions are host values) and enqueues the update on the compute stream: later work
 *    there sees the new parameters; other streams must synchronize with it first. gather returns
 *    once the unit's parameters are on the device, so any stream may read them.
 *  - Checkpoints are those of shardopt_optimizer: a checkpoint saved by either kind of optimizer
 *    loads into the other, at any world size and strategy. They pass through host memory.
 * Built without CUDA, create returns SHARDOPT_ERR_UNSUPPORTED.
 * ------------------------------------------------------------------------------------------- */
typedef struct shardopt_device_optimizer_s *shardopt_device_optimizer;

/* Collective over comm: creates this rank's device optimizer. The layout of `params` is copied.
 * `initial` (host memory, packed, element_count floats) may be NULL for zeros and must be equal
 * on every rank. cuda_stream: the compute stream (see above), NULL for the legacy default stream.
 * The optimizer keeps the communicator alive. Errors: INVALID_ARGUMENT (NULL, invalid options,
 * a communicator without a device such as inprocess or ucx, dtype other than F32, LAMB with
 * sharded state), UNSUPPORTED (built without CUDA, no usable device), MISMATCH, OUT_OF_MEMORY. */
SHARDOPT_API shardopt_status shardopt_device_optimizer_create(shardopt_comm comm, shardopt_params params,
                                                              const shardopt_optimizer_options *optimizer,
                                                              const shardopt_sharding_options *sharding,
                                                              const void *initial, void *cuda_stream,
                                                              shardopt_device_optimizer *out);
/* Not collective; frees the device memory. NULL: no-op. */
SHARDOPT_API shardopt_status shardopt_device_optimizer_destroy(shardopt_device_optimizer opt);

/* Layout queries, learning rate and step count, as shardopt_optimizer_tensor_count ...
 * shardopt_optimizer_step_count (never collective). */
SHARDOPT_API shardopt_status shardopt_device_optimizer_tensor_count(shardopt_device_optimizer opt, int *count);
SHARDOPT_API shardopt_status shardopt_device_optimizer_tensor_info(shardopt_device_optimizer opt, int tensor,
                                                                   size_t *count, int *bucket);
SHARDOPT_API shardopt_status shardopt_device_optimizer_bucket_count(shardopt_device_optimizer opt, int *count);
SHARDOPT_API shardopt_status shardopt_device_optimizer_bucket_info(shardopt_device_optimizer opt, int bucket,
                                                                   size_t *count);
SHARDOPT_API shardopt_status shardopt_device_optimizer_element_count(shardopt_device_optimizer opt, size_t *count,
                                                                     size_t *padded_count);
SHARDOPT_API shardopt_status shardopt_device_optimizer_set_learning_rate(shardopt_device_optimizer opt, double lr);
SHARDOPT_API shardopt_status shardopt_device_optimizer_step_count(shardopt_device_optimizer opt, int64_t *steps);

/* Parameters. *params receives DEVICE memory owned by the optimizer. */
/* The full flat buffer (padded_count floats) on the device. FSDP: INVALID_STATE. */
SHARDOPT_API shardopt_status shardopt_device_optimizer_parameters(shardopt_device_optimizer opt, void **params);
/* Device parameters of tensor t; FSDP only while its unit is gathered (else INVALID_STATE). */
SHARDOPT_API shardopt_status shardopt_device_optimizer_tensor_parameters(shardopt_device_optimizer opt, int tensor,
                                                                         void **params);
/* Packed copy of all parameters into HOST memory `packed` (count = element_count). Collective
 * for FSDP and hybrid. */
SHARDOPT_API shardopt_status shardopt_device_optimizer_get_parameters(shardopt_device_optimizer opt, void *packed,
                                                                      size_t count);
/* Replaces all parameters from HOST memory `packed` (count = element_count), identical on every
 * rank. */
SHARDOPT_API shardopt_status shardopt_device_optimizer_set_parameters(shardopt_device_optimizer opt,
                                                                      const void *packed, size_t count);
/* FSDP: collective over the group, makes unit b's full parameters available on the device and
 * returns them in *params (may be NULL); release frees them. Others: the resident pointer. */
SHARDOPT_API shardopt_status shardopt_device_optimizer_gather(shardopt_device_optimizer opt, int bucket,
                                                              void **params);
SHARDOPT_API shardopt_status shardopt_device_optimizer_release(shardopt_device_optimizer opt, int bucket);

/* Step protocol, every rank the same sequence, as shardopt_optimizer's:
 *   zero_grad; for each bucket b: fill bucket_grad(b) or tensor_grad(t) of b's tensors on the
 *   compute stream, grad_ready(b); step. */
SHARDOPT_API shardopt_status shardopt_device_optimizer_zero_grad(shardopt_device_optimizer opt);
/* Opens bucket b's gradient (cleared on the compute stream) and returns its DEVICE pointer in
 * *grad; *count (may be NULL) = its packed element count. Valid until the next step. */
SHARDOPT_API shardopt_status shardopt_device_optimizer_bucket_grad(shardopt_device_optimizer opt, int bucket,
                                                                   void **grad, size_t *count);
/* DEVICE pointer to tensor t's gradient inside its (opened) bucket; *count (may be NULL). */
SHARDOPT_API shardopt_status shardopt_device_optimizer_tensor_grad(shardopt_device_optimizer opt, int tensor,
                                                                   void **grad, size_t *count);
/* Bucket b's gradient is complete (on the compute stream): its reduction starts now. */
SHARDOPT_API shardopt_status shardopt_device_optimizer_grad_ready(shardopt_device_optimizer opt, int bucket);
/* Collective: reduces the remaining buckets and updates (or only accumulates); result may be
 * NULL. Errors as shardopt_optimizer_step. */
SHARDOPT_API shardopt_status shardopt_device_optimizer_step(shardopt_device_optimizer opt,
                                                            shardopt_step_result *result);

/* Collective: replicated state made identical (from rank 0; Local SGD: averaged), sharded state
 * checked (MISMATCH). */
SHARDOPT_API shardopt_status shardopt_device_optimizer_synchronize_state(shardopt_device_optimizer opt);
/* Collective: *stop = 1 on every rank when any rank voted non-zero. */
SHARDOPT_API shardopt_status shardopt_device_optimizer_should_early_stop(shardopt_device_optimizer opt, int vote,
                                                                         int *stop);
/* Device bytes this rank holds now (not collective); stats->struct_size set by the caller. */
SHARDOPT_API shardopt_status shardopt_device_optimizer_memory_stats(shardopt_device_optimizer opt,
                                                                    shardopt_memory_stats *stats);

/* Collective: shardopt_optimizer_optimize on the device optimizer. The model callback works on
 * HOST memory: the packed parameters are copied from the device for each call and its gradient
 * is copied into the device buckets; result->best_parameters is host memory too. A failing
 * callback aborts the communicator given to create. */
SHARDOPT_API shardopt_status shardopt_device_optimizer_optimize(shardopt_device_optimizer opt,
                                                                shardopt_model_fn model, void *user_data,
                                                                const shardopt_optimize_options *options,
                                                                shardopt_optimize_result *result);

/* Checkpoints, all collective, as shardopt_optimizer_save/load/serialize/deserialize (same
 * files and bytes; *data from serialize is host memory released with shardopt_buffer_free).
 * load and deserialize validate everything on every rank before the device is touched: a bad
 * checkpoint changes nothing. A device failure while the validated contents are copied in (a CUDA error,
 * a timeout) leaves the optimizer partly loaded: load again. */
SHARDOPT_API shardopt_status shardopt_device_optimizer_save(shardopt_device_optimizer opt, const char *dir,
                                                            shardopt_checkpoint_form form);
SHARDOPT_API shardopt_status shardopt_device_optimizer_load(shardopt_device_optimizer opt, const char *dir);
SHARDOPT_API shardopt_status shardopt_device_optimizer_serialize(shardopt_device_optimizer opt, void **data,
                                                                 size_t *size);
SHARDOPT_API shardopt_status shardopt_device_optimizer_deserialize(shardopt_device_optimizer opt, const void *data,
                                                                   size_t size);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SHARDOPT_H */

/* shardopt.h — the C ABI of shardopt: distributed and sharded optimizers (DDP, ZeRO-1/2, FSDP,
 * hybrid, Local SGD) in host or CUDA device memory, and the collectives under them.
 *
 * Two parts (the model of zstd's ZSTD_STATIC_LINKING_ONLY):
 *  - The stable part: everything declared below by default. It is frozen for the life of
 *    SHARDOPT_ABI_VERSION (2): no function changes its signature or meaning, no enum value is
 *    renumbered, no struct field moves or changes type. Minor releases only add functions, enum
 *    values and struct fields appended at the end (see struct_size). Its symbols are in the
 *    version node SHARDOPT_2 of libshardopt.so.2.
 *  - The experimental part: declared only when SHARDOPT_EXPERIMENTAL is defined before this
 *    header is included. Its functions may change or go in any minor release; they are exported
 *    in a version node named after the minor release (SHARDOPT_EXPERIMENTAL_0.2 here), so a
 *    program built against them fails to load, rather than misbehaves, on a release where they
 *    changed. Use them only with the libshardopt of the same minor release.
 *
 * Conventions (kept for the life of ABI version 2):
 *  - Objects are opaque handles with create/destroy pairs; destroy(NULL) is a no-op returning
 *    SHARDOPT_OK. A handle must not be used after it was destroyed.
 *  - Every function returns a shardopt_status (0 = SHARDOPT_OK) and writes outputs through
 *    pointers, except shardopt_version(), shardopt_abi_version(), shardopt_status_name() and
 *    shardopt_last_error_message(), which cannot fail. On failure, outputs are left unchanged
 *    and shardopt_last_error_message() describes the error on the calling thread.
 *  - No C++ exception crosses this boundary. A NULL handle or pointer, a bad dtype or op, a wrong
 *    size, a rank out of range or a call in the wrong state is reported as a status.
 *  - Options structs start with `size_t struct_size`; the library reads only the fields that fit
 *    in struct_size, so fields are only ever appended, and a field the caller's (older) struct
 *    lacks takes its default. Zero means default: a zeroed struct with struct_size set, e.g.
 *    `shardopt_sharding_options s = {sizeof s};`, asks for the defaults, and so does 0 in any
 *    field (switches: SHARDOPT_AUTO; only optimize's num_samples has no default).
 *    shardopt_optimizer_options, where 0 is a legitimate value
 *    of many fields, says which fields it sets in a field_mask instead. The _init functions fill
 *    every field with its default explicitly. Output structs also start with struct_size, which
 *    the caller sets (e.g. `shardopt_step_result r = {sizeof r};`); the library writes only the
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
#define SHARDOPT_VERSION_MINOR 2
#define SHARDOPT_VERSION_PATCH 0
/* MAJOR*10000 + MINOR*100 + PATCH, as shardopt_version() returns it. */
#define SHARDOPT_VERSION_NUMBER \
    (SHARDOPT_VERSION_MAJOR * 10000 + SHARDOPT_VERSION_MINOR * 100 + SHARDOPT_VERSION_PATCH)
/* Incremented only on an incompatible change of the stable part (2: one optimizer handle for host
 * and CUDA memory, zero-means-default options; the soname is libshardopt.so.<ABI version>). */
#define SHARDOPT_ABI_VERSION 2

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
/* The rank (in the world of the handle the call was made on) of the most recent failed call on
 * this thread, or -1 when it had no communicator or optimizer handle. Bindings put it on the
 * exception they raise. */
SHARDOPT_API int shardopt_last_error_rank(void);

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
 * (Experimental: shardopt_comm_create_inprocess_member lets each thread claim its own rank of a
 * group named by a string.) Errors: INVALID_ARGUMENT (size < 1, comms NULL), OUT_OF_MEMORY. */
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
/* A communicator from explicit arguments: AiDotNet's NCCLCommunicationBackend(rank, worldSize,
 * deviceId), the languages' NCCLCommunicationBackend and StagedCommunicationBackend. backend:
 * "nccl", "staged" or "ucx". rank and world_size: this process's rank and the job's size, or -1
 * each for the launcher's environment's (as shardopt_comm_create_from_env; without a launcher a
 * world of one: rank 0 of 1); both given or both -1. Where a launcher's environment names a
 * world, explicit values must equal it. device_id (nccl, staged): the CUDA device ordinal, or -1
 * for the local rank's GPU (local rank % device count, else the calling thread's current device);
 * ucx takes -1 only. The rendezvous master and timeout come from the environment as for
 * create_from_env (SHARDOPT_MASTER_ADDR/PORT, defaults 127.0.0.1:29500). Collective: every rank
 * of the job calls it.
 * Errors: INVALID_ARGUMENT (unknown backend, rank outside [0, world_size), one of rank/world_size
 * -1 and not the other, device_id < -1 or not a device of this host, explicit values the
 * launcher's environment contradicts: the message names both, out NULL), UNSUPPORTED (backend not
 * built in, NCCL cannot be loaded, no usable CUDA device: the message says which), TIMEOUT /
 * PEER_LOST (the rendezvous). */
SHARDOPT_API shardopt_status shardopt_comm_create(const char *backend, int rank, int world_size, int device_id,
                                                  shardopt_comm *comm);
/* The CUDA device ordinal of a GPU communicator (nccl, staged, or split from one); -1 for any
 * other. Errors: INVALID_ARGUMENT (NULL). */
SHARDOPT_API shardopt_status shardopt_comm_device(shardopt_comm comm, int *device);
/* A world of one rank for a program started without a launcher: backend "inprocess", "ucx" or
 * NULL ($SHARDOPT_BACKEND, else "inprocess"). Errors: INVALID_ARGUMENT (the environment names a
 * larger world: SHARDOPT_WORLD_SIZE or a launcher's variables > 1; use create_from_env there;
 * unknown backend; out NULL), UNSUPPORTED (backend not built in). */
SHARDOPT_API shardopt_status shardopt_comm_create_single(const char *backend, shardopt_comm *comm);
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
/* Root's buffer of count elements (a multiple of the world size; ignored on the other ranks, whose
 * count need not be known) split in rank order: each rank's part, count / size elements, in *recv,
 * allocated by the library (release it with shardopt_buffer_free), its element count in
 * *recv_count. Every rank passes the same dtype and root. A count that is not a multiple of the
 * world size (or a NULL buffer) on root is INVALID_ARGUMENT on every rank. */
SHARDOPT_API shardopt_status shardopt_scatter(shardopt_comm comm, const void *buffer, size_t count, shardopt_dtype dtype,
                                              int root, void **recv, size_t *recv_count);
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
 * Switches: booleans whose default may be on (the model of zstd's ZSTD_paramSwitch_e). 0 is
 * SHARDOPT_AUTO, the field's documented default; any other value is INVALID_ARGUMENT naming the
 * field.
 * ------------------------------------------------------------------------------------------- */
typedef enum shardopt_switch {
    SHARDOPT_AUTO = 0,    /* the field's default */
    SHARDOPT_ENABLE = 1,
    SHARDOPT_DISABLE = 2
} shardopt_switch;

/* ---------------------------------------------------------------------------------------------
 * Base optimizer options (formulas and defaults follow torch.optim)
 * ------------------------------------------------------------------------------------------- */
typedef enum shardopt_optimizer_kind {
    SHARDOPT_SGD = 0, SHARDOPT_ADAM = 1, SHARDOPT_ADAMW = 2, SHARDOPT_RMSPROP = 3, SHARDOPT_ADAGRAD = 4,
    SHARDOPT_LAMB = 5,
    /* docs/optimizers.md. Lion, NAdam, Adamax and Adadelta run under every strategy; Adafactor and
     * Muon are accepted by the options and refused (UNSUPPORTED) by the optimizers for now. */
    SHARDOPT_LION = 6, SHARDOPT_ADAFACTOR = 7, SHARDOPT_NADAM = 8, SHARDOPT_ADAMAX = 9, SHARDOPT_ADADELTA = 10,
    SHARDOPT_MUON = 11
} shardopt_optimizer_kind;

/* How Adam, AdamW and SGD's momentum keep their state: full precision, or blockwise quantized
 * from the global tensor's element index (8-bit: bitsandbytes' dynamic map, 256-element blocks;
 * 4-bit: torchao's, 128; tensors under 4096 elements stay full). Not with amsgrad. The
 * optimizers refuse 8BIT and 4BIT (UNSUPPORTED) for now: the rules exist, the engine's low-bit
 * state does not yet. */
typedef enum shardopt_state_precision {
    SHARDOPT_STATE_FULL = 0, SHARDOPT_STATE_8BIT = 1, SHARDOPT_STATE_4BIT = 2
} shardopt_state_precision;

/* Muon's learning-rate scale for a rows x cols matrix (torch.optim.Muon's adjust_lr_fn). */
typedef enum shardopt_muon_lr_adjust {
    SHARDOPT_MUON_LR_ORIGINAL = 0,          /* sqrt(max(1, rows / cols)) */
    SHARDOPT_MUON_LR_MATCH_RMS_ADAMW = 1,   /* 0.2 * sqrt(max(rows, cols)) */
    SHARDOPT_MUON_LR_SPECTRAL_UNCLAMPED = 2 /* sqrt(rows / cols) */
} shardopt_muon_lr_adjust;

/* The bits of shardopt_optimizer_options.field_mask, one per field (the model of UCX's
 * field_mask). Values are fixed forever; a field appended later gets the next bit. */
typedef enum shardopt_optimizer_field {
    SHARDOPT_OPT_FIELD_KIND = 1 << 0,
    SHARDOPT_OPT_FIELD_LR = 1 << 1,
    SHARDOPT_OPT_FIELD_WEIGHT_DECAY = 1 << 2,
    SHARDOPT_OPT_FIELD_MAXIMIZE = 1 << 3,
    SHARDOPT_OPT_FIELD_MOMENTUM = 1 << 4,
    SHARDOPT_OPT_FIELD_DAMPENING = 1 << 5,
    SHARDOPT_OPT_FIELD_NESTEROV = 1 << 6,
    SHARDOPT_OPT_FIELD_BETA1 = 1 << 7,
    SHARDOPT_OPT_FIELD_BETA2 = 1 << 8,
    SHARDOPT_OPT_FIELD_EPS = 1 << 9,
    SHARDOPT_OPT_FIELD_AMSGRAD = 1 << 10,
    SHARDOPT_OPT_FIELD_ALPHA = 1 << 11,
    SHARDOPT_OPT_FIELD_CENTERED = 1 << 12,
    SHARDOPT_OPT_FIELD_LR_DECAY = 1 << 13,
    SHARDOPT_OPT_FIELD_INITIAL_ACCUMULATOR_VALUE = 1 << 14,
    SHARDOPT_OPT_FIELD_STATE_PRECISION = 1 << 15,
    SHARDOPT_OPT_FIELD_MOMENTUM_DECAY = 1 << 16,
    SHARDOPT_OPT_FIELD_DECOUPLED_WEIGHT_DECAY = 1 << 17,
    SHARDOPT_OPT_FIELD_RHO = 1 << 18,
    SHARDOPT_OPT_FIELD_BETA2_DECAY = 1 << 19,
    SHARDOPT_OPT_FIELD_EPS2 = 1 << 20,
    SHARDOPT_OPT_FIELD_CLIP_THRESHOLD = 1 << 21,
    SHARDOPT_OPT_FIELD_NS_STEPS = 1 << 22,
    SHARDOPT_OPT_FIELD_NS_A = 1 << 23,
    SHARDOPT_OPT_FIELD_NS_B = 1 << 24,
    SHARDOPT_OPT_FIELD_NS_C = 1 << 25,
    SHARDOPT_OPT_FIELD_ADJUST_LR = 1 << 26,
    SHARDOPT_OPT_FIELD_ADAMW_LR = 1 << 27,
    SHARDOPT_OPT_FIELD_ADAMW_WEIGHT_DECAY = 1 << 28,
    SHARDOPT_OPT_FIELD_ADAMW_EPS = 1 << 29
} shardopt_optimizer_field;

/* Zero is a legitimate value of most of these fields (momentum, weight_decay, betas...), so they
 * are read only where their bit is set in field_mask; a field whose bit is clear (or that lies
 * beyond struct_size) takes torch.optim's default for `kind`. A field that is non-zero while its
 * bit is clear is INVALID_ARGUMENT naming the field and the bit, so a forgotten bit is an error,
 * never a value silently ignored; so is a bit this library does not know, or one for a field
 * beyond struct_size. A zeroed struct (`shardopt_optimizer_options o = {sizeof o};`) is SGD with
 * its defaults; to change lr only: `o.field_mask = SHARDOPT_OPT_FIELD_LR; o.lr = 0.1;`.
 * _init/_defaults fill every field with the defaults of their kind and set every bit, so after
 * them any field may simply be assigned. Default values are noted for Adam. */
typedef struct shardopt_optimizer_options {
    size_t struct_size;            /* sizeof(shardopt_optimizer_options), set by _init */
    uint64_t field_mask;           /* SHARDOPT_OPT_FIELD_* bits of the fields set below */
    shardopt_optimizer_kind kind;  /* SGD when its bit is clear; _init: SHARDOPT_ADAM */
    double lr;                     /* 1e-3 (RMSprop, Adagrad: 1e-2) */
    double weight_decay;           /* 0; L2 for SGD/Adam/RMSprop/Adagrad, decoupled for AdamW/LAMB */
    int32_t maximize;              /* 0 */
    double momentum;               /* SGD, RMSprop; 0 */
    double dampening;              /* SGD; 0 */
    int32_t nesterov;              /* SGD; 0 */
    double beta1, beta2, eps;      /* Adam, AdamW, LAMB (eps also RMSprop, Adagrad); 0.9, 0.999, 1e-8 */
    int32_t amsgrad;               /* Adam, AdamW; 0 */
    double alpha;                  /* RMSprop; 0.99 */
    int32_t centered;              /* RMSprop; 0 */
    double lr_decay;               /* Adagrad; 0 */
    double initial_accumulator_value; /* Adagrad; 0 */
    /* Appended (issue 37); torch.optim's defaults for the kind. */
    shardopt_state_precision state_precision; /* Adam, AdamW, SGD with momentum; FULL */
    double momentum_decay;         /* NAdam; 4e-3 */
    int32_t decoupled_weight_decay; /* NAdam; 0 */
    double rho;                    /* Adadelta; 0.9 */
    double beta2_decay;            /* Adafactor; -0.8 (eps is its eps1: 0 = the dtype's epsilon) */
    double eps2;                   /* Adafactor; 1e-3 */
    double clip_threshold;         /* Adafactor (torch's d); 1 */
    int32_t ns_steps;              /* Muon: Newton-Schulz steps; 5 */
    double ns_a, ns_b, ns_c;       /* Muon: the quintic's coefficients; 3.4445, -4.7750, 2.0315 */
    shardopt_muon_lr_adjust adjust_lr; /* Muon; ORIGINAL */
    double adamw_lr;               /* Muon: AdamW on the tensors that are not matrices; 1e-3 */
    double adamw_weight_decay;     /* Muon; 1e-2 */
    double adamw_eps;              /* Muon; 1e-8 */
} shardopt_optimizer_options;

/* Fills the first struct_size bytes of *opts with torch.optim's defaults for `kind`, sets the
 * field_mask bit of every field that fits and sets opts->struct_size = struct_size. Prefer the
 * inline wrappers below. Errors: INVALID_ARGUMENT (opts NULL, struct_size too small, unknown
 * kind). */
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

/* AiDotNet's base optimizer classes: the defaults each class's options start from, which are
 * AiDotNet's where it documents one (its base InitialLearningRate 0.01, MomentumOptimizer's momentum
 * 0.9, RMSprop's decay 0.9) and torch.optim's otherwise. Every binding's XxxOptimizerOptions is
 * filled by shardopt_optimizer_options_init_preset, so no language states a default of its own. */
typedef enum shardopt_optimizer_preset {
    SHARDOPT_PRESET_SGD = 0,      /* StochasticGradientDescentOptimizer: SGD, lr 0.01 */
    SHARDOPT_PRESET_MOMENTUM = 1, /* MomentumOptimizer: SGD, lr 0.01, momentum 0.9 */
    SHARDOPT_PRESET_ADAM = 2,     /* AdamOptimizer: lr 0.001, betas 0.9 / 0.999, eps 1e-8 */
    SHARDOPT_PRESET_ADAMW = 3,    /* AdamWOptimizer: as Adam, weight decay 0.01 */
    SHARDOPT_PRESET_RMSPROP = 4,  /* RootMeanSquarePropagationOptimizer: lr 0.01, decay (alpha) 0.9, eps 1e-8 */
    SHARDOPT_PRESET_ADAGRAD = 5,  /* AdagradOptimizer: torch's (lr 0.01) */
    SHARDOPT_PRESET_LAMB = 6,     /* LambOptimizer: torch-style (lr 1e-3, eps 1e-6) */
    SHARDOPT_PRESET_LION = 7,     /* LionOptimizer: lr 1e-4, betas 0.9 / 0.99 */
    SHARDOPT_PRESET_ADAFACTOR = 8, /* AdafactorOptimizer: torch's (lr 1e-2, beta2_decay -0.8, eps2 1e-3, d 1) */
    SHARDOPT_PRESET_NADAM = 9,    /* NadamOptimizer: torch's (lr 2e-3, momentum_decay 4e-3) */
    SHARDOPT_PRESET_ADAMAX = 10,  /* AdaMaxOptimizer: torch's (lr 2e-3) */
    SHARDOPT_PRESET_ADADELTA = 11, /* AdaDeltaOptimizer: torch's (lr 1, rho 0.9, eps 1e-6) */
    SHARDOPT_PRESET_MUON = 12     /* MuonOptimizer: torch's (lr 1e-3, momentum 0.95, nesterov, wd 0.1) */
} shardopt_optimizer_preset;
/* Fills *opts as _init_sized does, with the preset's values. Errors: INVALID_ARGUMENT (opts NULL,
 * struct_size too small, unknown preset). */
SHARDOPT_API shardopt_status shardopt_optimizer_options_init_preset(shardopt_optimizer_options *opts,
                                                                    size_t struct_size,
                                                                    shardopt_optimizer_preset preset);
/* Checks *opts as create would (field_mask, ranges: lr >= 0, betas in [0, 1), eps > 0, ...):
 * INVALID_ARGUMENT naming the first bad field. */
SHARDOPT_API shardopt_status shardopt_optimizer_options_validate(const shardopt_optimizer_options *opts);

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
/* Appends a rows x cols matrix (row-major): shardopt_params_add with count rows * cols, the shape
 * kept for PowerSGD compression. Errors: INVALID_ARGUMENT (as add; rows or cols 0). */
SHARDOPT_API shardopt_status shardopt_params_add_matrix(shardopt_params params, const char *name, size_t rows,
                                                        size_t cols, int tp_replicated, int *index);
/* Closes the current bucket: the next tensor starts a new one (an FSDP unit boundary). */
SHARDOPT_API shardopt_status shardopt_params_end_bucket(shardopt_params params);
/* Tensors registered so far. Errors: INVALID_ARGUMENT (NULL). */
SHARDOPT_API shardopt_status shardopt_params_tensor_count(shardopt_params params, int *count);
/* Real parameter elements (the packed length used by get/set_parameters and optimize). */
SHARDOPT_API shardopt_status shardopt_params_element_count(shardopt_params params, size_t *count);
/* Flat buffer length when sharded over `shards` ranks: what shardopt_optimizer_create_external
 * needs (shards = the communicator size for DDP and ZeRO). */
SHARDOPT_API shardopt_status shardopt_params_padded_count(shardopt_params params, int shards, size_t *count);
/* The same for an optimizer created with `sharding` (its parameter_group_size cuts the buckets;
 * NULL: as shardopt_params_padded_count). */
struct shardopt_sharding_options;
SHARDOPT_API shardopt_status shardopt_params_padded_count_for(shardopt_params params,
                                                              const struct shardopt_sharding_options *sharding,
                                                              int shards, size_t *count);

/* ---------------------------------------------------------------------------------------------
 * Sharded optimizers
 * ------------------------------------------------------------------------------------------- */
typedef enum shardopt_strategy {
    SHARDOPT_DDP = 0, SHARDOPT_ZERO1 = 1, SHARDOPT_ZERO2 = 2, SHARDOPT_FSDP = 3, SHARDOPT_HYBRID = 4,
    SHARDOPT_LOCAL_SGD = 5,
    /* Asynchronous SGD with bounded staleness (async_staleness), each rank the owner of a shard
     * (docs/async_sgd.md). It trains through shardopt_optimizer_optimize only: the step protocol
     * (zero_grad, bucket_grad, tensor_grad, grad_ready, step) returns UNSUPPORTED; parameters,
     * checkpoints, state synchronization and early stopping work as for the others. Host memory;
     * no compression, clipping, gradient accumulation, caller-owned parameters or (on more than one
     * rank) LAMB: UNSUPPORTED. */
    SHARDOPT_ASYNC_SGD = 6
} shardopt_strategy;

typedef enum shardopt_memory_space {
    SHARDOPT_MEMORY_HOST = 0, /* host memory, over any communicator */
    SHARDOPT_MEMORY_CUDA = 1  /* CUDA device memory, over a GPU communicator (nccl or staged) */
} shardopt_memory_space;

/* Gradient compression of every gradient reduction (and of Local SGD's averaging): see
 * docs/compression.md. Values are stable. */
typedef enum shardopt_compression {
    SHARDOPT_COMPRESSION_NONE = 0,
    SHARDOPT_COMPRESSION_BF16 = 1,      /* 2 bytes per element, f32 accumulation */
    SHARDOPT_COMPRESSION_FP16 = 2,
    SHARDOPT_COMPRESSION_INT8 = 3,      /* blockwise, a scale per block, error feedback */
    SHARDOPT_COMPRESSION_INT4 = 4,
    SHARDOPT_COMPRESSION_TOP_K = 5,     /* the compression_ratio largest of each chunk, error feedback */
    SHARDOPT_COMPRESSION_POWER_SGD = 6  /* rank-r PowerSGD of matrix tensors (shardopt_params_add_matrix) */
} shardopt_compression;

/* Zero means default in every field (noted after each), so `shardopt_sharding_options s =
 * {sizeof s};` is plain DDP in host memory; _init writes the same defaults explicitly. */
typedef struct shardopt_sharding_options {
    size_t struct_size;                  /* set by _init */
    shardopt_strategy strategy;          /* SHARDOPT_DDP */
    int32_t gradient_accumulation_steps; /* micro-steps summed before one update (mean); 0 = 1 */
    double max_grad_norm;                /* global-norm clipping across shards; 0 = off */
    shardopt_switch skip_nonfinite;      /* skip the update everywhere on NaN/Inf grads; AUTO = on */
    int32_t staging_buffers;             /* ZeRO-2/FSDP bucket staging buffers; 0 = 1 */
    shardopt_switch fsdp_prefetch;       /* FSDP: gather(u) prefetches the unit the previous step gathered next
                                            (the first step: the next in the direction of travel); AUTO = on */
    int32_t pipeline_parallel_size;      /* hybrid grid; 0 = 1 */
    int32_t tensor_parallel_size;        /* hybrid grid; 0 = 1 */
    int32_t data_parallel_size;          /* hybrid grid; 0 (or -1) = the rest of the world */
    shardopt_strategy hybrid_data_strategy; /* inside each data group: DDP/ZERO1/ZERO2/FSDP; DDP */
    int32_t hsdp_replicas;               /* hybrid with FSDP: replicated sub-groups; 0 = 1 */
    int32_t local_sgd_period;            /* Local SGD: average parameters every H steps; 0 = 4 */
    /* Where parameters, gradients, optimizer state and staging buffers live; HOST. CUDA: the
     * device memory of the communicator's GPU (see shardopt_optimizer_create). */
    shardopt_memory_space memory;
    /* memory CUDA: the compute stream (a cudaStream_t of the communicator's device, in the
     * primary context) on which the optimizer enqueues its passes and the caller computes
     * gradients; NULL = the legacy default stream. Must be NULL with HOST memory. */
    void *cuda_stream;
    /* Threads of this rank's optimizer update, the calling thread included; 0 = automatic
     * ($SHARDOPT_NUM_THREADS, else the hardware concurrency, at most 16; updates under 64K
     * elements stay on the calling thread). Results are bitwise the same for any value. */
    int32_t update_threads;
    /* ZeRO-1/2: leave the parameter allgather after the update running when step returns, so it
     * overlaps what the caller does next. Bucket b's parameters are complete once gather(b),
     * tensor_parameters, parameters, get_parameters or the next step is called: a pointer kept
     * from before must not be read until then. AUTO = off (step returns with parameters
     * complete). Results are the same either way. */
    shardopt_switch overlap_param_gather;
    /* AUTO = on: the `initial` parameters given to create are rank 0's, broadcast over each
     * data-parallel group (as PyTorch DDP does), so replicas cannot start apart. DISABLE keeps
     * every rank's own. */
    shardopt_switch broadcast_initial;
    /* Gradient compression (host memory only: UNSUPPORTED with CUDA memory); NONE. */
    shardopt_compression compression;
    double compression_ratio;         /* TOP_K: fraction of each chunk sent; 0 = 0.1 */
    int32_t compression_block_size;   /* INT8/INT4: elements per scale; 0 = 256 */
    int32_t power_sgd_rank;           /* POWER_SGD: rank of the approximation; 0 = 4 */
    uint64_t power_sgd_min_elements;  /* POWER_SGD: smaller matrices go uncompressed; 0 = 4096 */
    /* Keep what compression missed and add it to the next step (INT8, INT4, TOP_K, POWER_SGD);
     * AUTO = on. */
    shardopt_switch error_feedback;
    /* ZeRO-Offload (docs/offload.md; AiDotNet's CpuOffloadOptimizer, CpuOffloadGradients,
     * CpuOffloadParams), for CUDA memory; AUTO = off. With HOST memory they are accepted and change
     * nothing (everything already is in host memory). With CUDA memory INVALID_ARGUMENT when
     * cpu_offload_gradients or cpu_offload_params is on without cpu_offload_optimizer, when
     * cpu_offload_params is on for a strategy other than FSDP (or hybrid with FSDP inside), and for
     * Local SGD or hsdp_replicas > 1. */
    /* The optimizer state and fp32 master weights of this rank's owned part in host memory, the
     * update on the CPU (update_threads); gradients copied to the host per bucket as their
     * reductions complete, updated parameters back per bucket. Results equal the same optimizer
     * in host memory. */
    shardopt_switch cpu_offload_optimizer;
    shardopt_switch cpu_offload_gradients; /* reduced gradients kept in host memory only */
    shardopt_switch cpu_offload_params;    /* FSDP: the parameter shard at rest in host memory */
    /* ASYNC_SGD: allowStaleness, the clocks a gradient may lag behind the parameters it is applied
     * to (>= 0); 0, the default, is synchronous: DDP's result bit for bit. Must be 0 for the other
     * strategies. */
    int32_t async_staleness;
    /* AiDotNet's MinimumParameterGroupSize: > 0 cuts the parameter set into gradient buckets (FSDP
     * units) of about this many elements, keeping the set's own shardopt_params_end_bucket
     * boundaries, instead of the set's bucket_bytes; 0 = the set's own buckets. */
    int64_t parameter_group_size;
    /* AiDotNet's ShardingConfiguration.LearningRate: > 0 replaces the optimizer options' lr; 0 keeps
     * theirs (there is one rate, the optimizer's). */
    double learning_rate;
    /* AiDotNet's AutoSyncGradients; AUTO = on. DISABLE turns DDP and ZeRO-1 into Local SGD (no
     * gradient reduction, parameters averaged every local_sgd_period steps); the sharded strategies
     * reduce gradients every step and refuse it (INVALID_ARGUMENT at create). */
    shardopt_switch auto_sync_gradients;
} shardopt_sharding_options;

/* Fills *opts with the defaults noted above (struct_size as given); prefer the inline _init.
 * Errors: INVALID_ARGUMENT (NULL, struct_size too small). */
SHARDOPT_API shardopt_status shardopt_sharding_options_init_sized(shardopt_sharding_options *opts, size_t struct_size);
static inline shardopt_status shardopt_sharding_options_init(shardopt_sharding_options *opts) {
    return shardopt_sharding_options_init_sized(opts, sizeof *opts);
}

/* AiDotNet's ShardingConfiguration factories, as option values (the other fields: defaults). */
typedef enum shardopt_sharding_preset {
    SHARDOPT_SHARDING_DEFAULT = 0,          /* CreateDefault: parameter groups of 1024 elements */
    SHARDOPT_SHARDING_HIGH_BANDWIDTH = 1,   /* CreateForHighBandwidth: groups of 512, no compression */
    SHARDOPT_SHARDING_LOW_BANDWIDTH = 2,    /* CreateForLowBandwidth: groups of 4096, INT8 compression */
    SHARDOPT_SHARDING_ZERO_OFFLOAD = 3,     /* CreateForZeROOffload: groups of 1024, cpu_offload_optimizer */
    SHARDOPT_SHARDING_ZERO_OFFLOAD_FULL = 4 /* CreateForZeROOffloadFull: and the gradients and parameters */
} shardopt_sharding_preset;
/* Fills *opts with the preset's values (struct_size as given). Errors: INVALID_ARGUMENT (NULL,
 * struct_size too small, unknown preset). */
SHARDOPT_API shardopt_status shardopt_sharding_options_init_preset(shardopt_sharding_options *opts,
                                                                   size_t struct_size, shardopt_sharding_preset preset);
/* Checks every field of *opts (ranges, enum values, and auto_sync_gradients with opts->strategy), as
 * create would, without a communicator: INVALID_ARGUMENT naming the first bad field. (Combinations
 * that depend on the memory or the world are checked by create.) */
SHARDOPT_API shardopt_status shardopt_sharding_options_validate(const shardopt_sharding_options *opts);
/* As shardopt_sharding_options_validate, and INVALID_ARGUMENT naming the field for a 0 (SHARDOPT_AUTO) where the C
 * ABI reads 0 as a default that _init writes as a value: gradient_accumulation_steps, staging_buffers, the hybrid
 * sizes, hsdp_replicas, local_sgd_period, compression_ratio, compression_block_size, power_sgd_rank,
 * power_sgd_min_elements and the switches. A struct filled by _init or _init_preset holds no 0 there, so such a 0 was
 * set by the caller, who meant a value: what a binding's setters call, so that no language restates the rule. (Fields
 * where 0 is a value, or _init's own default, are as in _validate: max_grad_norm, update_threads, async_staleness,
 * parameter_group_size, learning_rate.) Fields beyond struct_size are not checked. */
SHARDOPT_API shardopt_status shardopt_sharding_options_validate_strict(const shardopt_sharding_options *opts);

typedef struct shardopt_optimizer_s *shardopt_optimizer;

/* Collective over comm: creates this rank's sharded optimizer with library-owned memory in
 * sharding->memory. The layout of `params` is copied (params may be destroyed afterwards).
 * `initial` (host memory, packed, element_count elements of the set's dtype) may be NULL for
 * zeros and must be equal on every rank. Errors: INVALID_ARGUMENT (NULL, invalid options: the
 * message names the field), MISMATCH, UNSUPPORTED, OUT_OF_MEMORY.
 *
 * With memory = SHARDOPT_MEMORY_CUDA the optimizer keeps its parameters, gradients, optimizer
 * state and staging buffers in the device memory of comm's GPU (comm from
 * shardopt_comm_create_from_env with "nccl" or "staged", or split from one); the strategies,
 * options, step protocol, results, errors and checkpoint files are those of host memory, except:
 *  - Every pointer the optimizer returns (parameters, tensor_parameters, gather, bucket_grad,
 *    tensor_grad) is CUDA device memory on comm's device: never dereference it on the host.
 *    Host memory is what `initial`, get_parameters/set_parameters, the optimize callback,
 *    optimize's best_parameters and the checkpoint calls take.
 *  - Parameter sets of dtype SHARDOPT_F32 only; LAMB only where no tensor's update is split
 *    across ranks (DDP, Local SGD, or a sharding group of one rank); otherwise UNSUPPORTED.
 *  - Streams: the optimizer enqueues its passes on sharding->cuda_stream (NULL: the legacy
 *    default stream). bucket_grad/tensor_grad clear the gradient on that stream: write the
 *    gradient there, or on a stream ordered after it. grad_ready(b) orders b's reduction after
 *    the work already on the compute stream and starts it at once, so it overlaps the gradients
 *    of later buckets. step waits for the reductions, reads the gradient norm back
 *    (result->grad_norm and the skip and clip decisions are host values) and enqueues the update
 *    on the compute stream: later work there sees the new parameters; other streams must
 *    synchronize with it first. gather returns once the unit's parameters are on the device, so
 *    any stream may read them.
 *  - Checkpoints pass through host memory and are the same files and bytes as host memory's: a
 *    checkpoint saved from either memory space loads into the other, at any world size and
 *    strategy. load and deserialize validate everything on every rank before the device is
 *    touched (a bad checkpoint changes nothing); a device failure while the validated contents
 *    are copied in (a CUDA error, a timeout) leaves the optimizer partly loaded: load again.
 *  - optimize copies the packed parameters from the device for each callback and its gradient
 *    into the device buckets.
 * Errors also: INVALID_ARGUMENT (a communicator without a device, such as inprocess or ucx: the
 * message names its backend), UNSUPPORTED (built without CUDA, no usable device, dtype other than
 * F32, LAMB with sharded state). */
SHARDOPT_API shardopt_status shardopt_optimizer_create(shardopt_comm comm, shardopt_params params,
                                                       const shardopt_optimizer_options *optimizer,
                                                       const shardopt_sharding_options *sharding,
                                                       const void *initial, shardopt_optimizer *out);
/* Like create, but the parameters live in the caller's buffer of `param_count` elements (in
 * sharding->memory: device memory for CUDA), which must equal shardopt_params_padded_count(params,
 * comm size) and outlive the optimizer (zero copy). DDP, ZeRO-1, ZeRO-2 and Local SGD only (FSDP,
 * hybrid and async SGD: UNSUPPORTED). Errors also: INVALID_ARGUMENT (wrong param_count). */
SHARDOPT_API shardopt_status shardopt_optimizer_create_external(shardopt_comm comm, shardopt_params params,
                                                                const shardopt_optimizer_options *optimizer,
                                                                const shardopt_sharding_options *sharding,
                                                                const void *initial, void *param_buffer,
                                                                size_t param_count, shardopt_optimizer *out);
/* Not collective; frees the optimizer's memory. NULL: no-op. */
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
/* The learning rate the next step uses (after set_learning_rate, or a load: the checkpoint's). */
SHARDOPT_API shardopt_status shardopt_optimizer_learning_rate(shardopt_optimizer opt, double *lr);
/* AiDotNet's GetOptions().LearningRate = x, for callers that keep the options they created opt from and
 * may change them later (the bindings): `options` is read for its lr only. When that differs from the lr
 * opt last took from its options (at create, or at an earlier call), it becomes the rate of later steps, as
 * set_learning_rate; otherwise the rate in force (set_learning_rate's, a schedule's, a load's) stays. The
 * bindings call it before each step, train, pipeline batch and learning-rate query or change. Errors:
 * INVALID_ARGUMENT (NULL, a bad lr). */
SHARDOPT_API shardopt_status shardopt_optimizer_follow_options(shardopt_optimizer opt,
                                                               const shardopt_optimizer_options *options);
/* Updates applied so far (accumulation micro-steps and skipped steps not counted). */
SHARDOPT_API shardopt_status shardopt_optimizer_step_count(shardopt_optimizer opt, int64_t *steps);

/* Parameters. Pointers returned stay owned by the optimizer; with CUDA memory they are device
 * memory, while get_parameters/set_parameters take host memory. */
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
/* For bindings, whose arrays carry their element type and length: checks an array given as `what` (count
 * elements of dtype) against opt's packed parameters (element_count elements of its dtype), or against params
 * (of its dtype; need elements, 0: its element count). INVALID_ARGUMENT, e.g. "initial holds float64 elements
 * but the layout is float32", "values has 3 elements; the layout needs 9". */
SHARDOPT_API shardopt_status shardopt_optimizer_check_array(shardopt_optimizer opt, const char *what,
                                                            shardopt_dtype dtype, size_t count);
SHARDOPT_API shardopt_status shardopt_params_check_array(shardopt_params params, const char *what,
                                                         shardopt_dtype dtype, size_t count, size_t need);
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
    /* Where step spent its time, in seconds (>= 0): waiting for the gradient reductions still
     * in flight (what the caller's computation did not hide), the optimizer update, and the
     * collectives after it (ZeRO parameter allgather, Local SGD averaging). */
    double reduce_wait_seconds;
    double update_seconds;
    double post_update_seconds;
    /* Bytes this rank moved over the optimizer's communicators since the previous step returned
     * (counted by the transports as the data moved). */
    uint64_t bytes_sent;
} shardopt_step_result;

/* Starts a step: every bucket's gradient is closed and will read as zero until filled. With CUDA
 * memory, see shardopt_optimizer_create for the streams these calls use. */
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
    uint64_t total_bytes;           /* params + grads + state + buffers + compression */
    /* Gradient compression: error-feedback residuals, PowerSGD's Q matrices, payload buffers. */
    uint64_t compression_bytes;
    /* The fields above count the optimizer's memory space (device memory with CUDA memory).
     * ZeRO-Offload also holds host memory: the parameter shard at rest (cpu_offload_params), the
     * reduced gradients of the rank's owned part, the optimizer state with the fp32 master
     * weights; 0 without offload and with HOST memory. */
    uint64_t host_params_bytes;
    uint64_t host_grads_bytes;
    uint64_t host_optimizer_state_bytes;
    uint64_t host_total_bytes; /* the three above */
} shardopt_memory_stats;

/* Bytes this rank holds now, in its memory space (not collective). stats->struct_size must be set
 * by the caller. */
SHARDOPT_API shardopt_status shardopt_optimizer_memory_stats(shardopt_optimizer opt, shardopt_memory_stats *stats);
/* Where the optimizer's memory is: its memory space, the CUDA device ordinal (-1 with HOST memory)
 * and its compute stream (sharding->cuda_stream; NULL: the legacy default stream, and with HOST
 * memory). Any output may be NULL. Not collective. Errors: INVALID_ARGUMENT (NULL handle). */
SHARDOPT_API shardopt_status shardopt_optimizer_device(shardopt_optimizer opt, shardopt_memory_space *memory,
                                                       int *device, void **cuda_stream);
/* Makes the CUDA stream `consumer_stream` (a cudaStream_t; NULL: the legacy default stream) wait
 * for the work enqueued on the optimizer's compute stream so far, before another library reads or
 * writes the optimizer's device memory there: an event recorded on the compute stream that the
 * consumer's stream waits for on the device (the host never waits; no device-wide synchronize).
 * What DLPack's __dlpack__(stream=...) and CUDA Array Interface consumers need. With HOST memory
 * there is nothing to order: OK. Not collective. Errors: INVALID_ARGUMENT (NULL handle), the CUDA
 * runtime's error of the event calls. */
SHARDOPT_API shardopt_status shardopt_optimizer_order_stream(shardopt_optimizer opt, void *consumer_stream);
/* Bytes this rank has moved over the optimizer's communicators so far (not collective). */
SHARDOPT_API shardopt_status shardopt_optimizer_bytes_sent(shardopt_optimizer opt, uint64_t *bytes);

/* ---------------------------------------------------------------------------------------------
 * optimize(): the training loop over the step protocol
 * ------------------------------------------------------------------------------------------- */
/* Model callback: the mean loss over samples[0..sample_count) at `params` (packed, all tensors
 * in order) into *loss, and the mean gradient into `grad` (packed, zeroed on entry). Called on
 * every rank's thread with that rank's samples, always in host memory (CUDA memory: copied from
 * and to the device around each call). Return 0 on success; any other value makes optimize fail
 * with SHARDOPT_ERR_INVALID_STATE and aborts the communicator so peers stop too. */
typedef int (*shardopt_model_fn)(void *user_data, const void *params, void *grad, const int64_t *samples,
                                 size_t sample_count, double *loss);

/* Zero means default in every field but num_samples, which has none. */
typedef struct shardopt_optimize_options {
    size_t struct_size;     /* set by _init */
    int64_t num_samples;    /* data set size (> 0), split across data-parallel ranks; no default */
    int64_t batch_size;     /* global batch per step; 0 = the whole data set */
    int32_t epochs;         /* 0 = 1 */
    int64_t max_iterations; /* 0 = no limit beyond epochs */
    int32_t patience;       /* epochs without improvement before stopping; 0 = never */
    double min_delta;       /* smaller improvements do not count; 0 */
    /* ENABLE: each epoch visits the samples in a fresh random order, the same on every rank,
     * drawn from (seed, epoch) by a fixed generator; AUTO = off (samples in order). */
    shardopt_switch shuffle;
    uint64_t seed;
    /* The number of the first epoch this call runs, for the shuffle order (>= 0; 0): a loop that
     * calls optimize once per epoch passes its epoch and gets one multi-epoch call's orders. */
    int32_t first_epoch;
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
 * INVALID_STATE (the callback failed, here or on a peer: the message names the rank and, when
 * the callback gave one with shardopt_model_error, its reason; or the loss averaged over the
 * ranks is NaN or infinite), and those of the collectives. */
SHARDOPT_API shardopt_status shardopt_optimizer_optimize(shardopt_optimizer opt, shardopt_model_fn model,
                                                         void *user_data, const shardopt_optimize_options *options,
                                                         shardopt_optimize_result *result);

/* ---------------------------------------------------------------------------------------------
 * train(): the training policy every language shares (docs/training.md)
 *
 * One loop, written once, that every binding's Optimize calls: epochs over a training set split
 * across the data-parallel ranks, the samples shuffled per epoch from a seed (the same order on
 * every rank), a learning-rate schedule, a validation score, the choice of the best solution,
 * early stopping voted across ranks, and the losses of the best solution on the training,
 * validation and test sets. The defaults are AiDotNet's (MaxIterations 100 epochs, BatchSize 32,
 * ShuffleData, UseEarlyStopping with patience 10 and tolerance 1e-6), set by
 * shardopt_training_options_init; a binding maps its option names onto these fields and states
 * no default of its own.
 *
 * Words, with one meaning each: an *epoch* is one pass over the training set (AiDotNet's
 * "iteration": MaxIterations is max_epochs); a *step* is one optimizer step on one global batch.
 * The *score* of an epoch is the validation loss at its end when there is a validation set, else
 * the mean training loss of its batches. The *best epoch* is the first epoch with the lowest score;
 * the best solution is the parameters at its end. Early stopping ends training once `patience`
 * epochs in a row have not lowered the score by more than `tolerance` below the last epoch that
 * did (the tolerance decides what counts as progress, never which epoch is best).
 * ------------------------------------------------------------------------------------------- */
typedef enum shardopt_dataset {
    SHARDOPT_DATASET_TRAINING = 0,
    SHARDOPT_DATASET_VALIDATION = 1,
    SHARDOPT_DATASET_TEST = 2
} shardopt_dataset;

/* What the batch callback is asked for. Filled by the library; struct_size is the library's. */
typedef struct shardopt_batch {
    size_t struct_size;
    shardopt_dataset dataset;  /* which set the sample indices index */
    const void *params;        /* packed parameters (element_count of the set's dtype), read-only */
    void *grad;                /* the mean gradient to write (packed, zeroed on entry); NULL: loss only */
    const int64_t *samples;    /* this rank's sample indices into the set, in visiting order */
    size_t sample_count;       /* >= 1 (a rank whose share of a batch is empty is not called) */
    int32_t epoch;             /* from 0 */
    int64_t step;              /* optimizer steps taken before this batch, over every epoch */
    /* 1 with the training options' device_batches: params and grad are the optimizer's CUDA device
     * memory on `device`, params ready and grad zeroed in the order of `cuda_stream` (its
     * cudaStream_t, the sharding options' cuda_stream; NULL: the legacy default stream). The model
     * enqueues its work there (or makes that stream wait for its own) before it returns; the
     * library's next work on grad is enqueued there after the call. 0: host memory (device -1). */
    int32_t on_device;
    int32_t device;
    void *cuda_stream;
} shardopt_batch;

/* The model: the mean loss over batch->samples of batch->dataset at batch->params into *loss, and,
 * when batch->grad is not NULL, the mean gradient into it. Called on every rank's own thread, in
 * host memory (CUDA memory: copied from and to the device around the call), or with device_batches
 * in the optimizer's device memory (batch->on_device). Return 0; anything
 * else fails train on every rank (INVALID_STATE naming this rank, and shardopt_model_error's
 * message when the callback gave one) and aborts the communicator so the peers stop at once. */
typedef int (*shardopt_batch_fn)(void *user_data, const shardopt_batch *batch, double *loss);

/* Called by a model callback (shardopt_batch_fn, shardopt_model_fn, shardopt_lr_fn, a pipeline
 * stage, a shardopt_write_fn) on its own thread before it returns non-zero: `message` (copied; NULL clears it) says why,
 * and the error on every rank then names this rank and the message instead of only the return
 * code. Cannot fail. */
SHARDOPT_API void shardopt_model_error(const char *message);

typedef enum shardopt_lr_schedule {
    SHARDOPT_LR_CONSTANT = 0,          /* base */
    SHARDOPT_LR_WARMUP = 1,            /* base * (t + 1) / warmup while t < warmup, then base */
    SHARDOPT_LR_COSINE = 2,            /* torch's CosineAnnealingLR over decay_period (u = min(t, T)):
                                        * min_lr + (base - min_lr) * (1 + cos(pi * u / T)) / 2 */
    SHARDOPT_LR_STEP_DECAY = 3,        /* torch's StepLR: base * gamma^floor(t / decay_period) */
    SHARDOPT_LR_WARMUP_COSINE = 4,     /* WARMUP, then COSINE of t - warmup */
    SHARDOPT_LR_WARMUP_STEP_DECAY = 5, /* WARMUP, then STEP_DECAY of t - warmup */
    SHARDOPT_LR_CUSTOM = 6             /* lr_fn */
} shardopt_lr_schedule;

/* A custom schedule: the rate for t (an epoch or a step, from 0) given base (the optimizer's rate
 * when train started) into *lr (finite, >= 0). Return 0; anything else fails train on every rank. */
typedef int (*shardopt_lr_fn)(void *user_data, int64_t t, double base, double *lr);

/* The fields hold plain values (0 is a value, as tolerance 0 or seed 0 are): start from
 * shardopt_training_options_init, then assign. Fields beyond the caller's struct_size take their
 * defaults. Defaults are noted after each field. */
typedef struct shardopt_training_options {
    size_t struct_size;              /* set by _init */
    int64_t num_samples;             /* training set size (>= 1); no default (0: INVALID_ARGUMENT) */
    int64_t num_validation_samples;  /* 0: no validation set; the score is the training loss */
    int64_t num_test_samples;        /* 0: no test set */
    int64_t batch_size;              /* samples per step over all ranks; 32; 0 = the whole set */
    int32_t max_epochs;              /* AiDotNet's MaxIterations; 100 (>= 1) */
    int64_t max_steps;               /* steps over all epochs; 0 = no limit */
    int32_t shuffle;                 /* a fresh order each epoch from (seed, epoch); 1 */
    uint64_t seed;                   /* 0 */
    int32_t early_stopping;          /* AiDotNet's UseEarlyStopping; 1 */
    int32_t patience;                /* AiDotNet's EarlyStoppingPatience; 10 (>= 1) */
    double tolerance;                /* AiDotNet's Tolerance; 1e-6 (>= 0) */
    /* The learning rate: base is the optimizer's rate when train starts (the options' lr, or the
     * sharding options' learning_rate, or the last set_learning_rate or load). */
    shardopt_lr_schedule lr_schedule; /* SHARDOPT_LR_CONSTANT */
    int32_t lr_per_step;             /* 0: t counts epochs (set before each epoch); 1: steps (before each step) */
    int64_t warmup;                  /* WARMUP*: epochs or steps of warm-up; 0 */
    /* COSINE*: T, the epochs or steps the cosine spans; 0 = to the end of training (max_epochs, or
     * the steps of max_epochs capped by max_steps, less the warm-up). STEP_DECAY*: epochs or steps
     * per decay (>= 1 when used; 0 = 1). */
    int64_t decay_period;
    double min_lr;                   /* COSINE*: the rate it ends at; 0 */
    double gamma;                    /* STEP_DECAY*: the factor per period; 0.1 */
    shardopt_lr_fn lr_fn;            /* CUSTOM (required then) */
    void *lr_user_data;
    /* After training, the best solution's loss over each whole set present (a pass of loss-only
     * calls); 1. 0 leaves the result's training_loss, validation_loss and test_loss NaN. */
    int32_t evaluate_best;
    /* The model on the GPU: with an optimizer in CUDA memory, each batch's params and grad are
     * packed buffers of its device memory (shardopt_batch.on_device), filled and read device to
     * device on its compute stream; 0: host copies around every call. 1 with an optimizer in host
     * memory: INVALID_ARGUMENT from train. 0. */
    int32_t device_batches;
} shardopt_training_options;

/* Fills *opts with the defaults above (num_samples 0 still to set); prefer the inline _init.
 * Errors: INVALID_ARGUMENT (NULL, struct_size too small). */
SHARDOPT_API shardopt_status shardopt_training_options_init_sized(shardopt_training_options *opts,
                                                                  size_t struct_size);
static inline shardopt_status shardopt_training_options_init(shardopt_training_options *opts) {
    return shardopt_training_options_init_sized(opts, sizeof *opts);
}
/* Checks *opts as train would: INVALID_ARGUMENT naming the first bad field. (Its fields hold plain values, and where
 * 0 stands for a default, as decay_period's, _init writes 0: there is no _strict form.) */
SHARDOPT_API shardopt_status shardopt_training_options_validate(const shardopt_training_options *opts);
/* The rate schedule `opts` gives at t for base, as train applies it (bindings and tests use it to
 * show a schedule without training). Errors: INVALID_ARGUMENT (bad options, t < 0, NULL), and a
 * custom lr_fn's failure (INVALID_STATE). */
SHARDOPT_API shardopt_status shardopt_training_learning_rate(const shardopt_training_options *opts, int64_t t,
                                                             double base, double *lr);

typedef struct shardopt_training_result {
    size_t struct_size;                /* set by the caller: sizeof(shardopt_training_result) */
    /* in: caller buffers (each may be NULL) */
    void *best_parameters;             /* receives the best solution (packed)... */
    size_t best_parameters_count;      /* ...its capacity in elements: 0 or element_count */
    double *training_loss_history;     /* receives each epoch's mean training loss... */
    double *validation_loss_history;   /* ...and validation loss (NaN without a validation set)... */
    double *learning_rate_history;     /* ...and the rate of its first step... */
    size_t history_capacity;           /* ...up to this many epochs each */
    /* out */
    int32_t epochs;                    /* epochs run (may exceed history_capacity) */
    int64_t steps;                     /* optimizer steps run */
    int32_t best_epoch;                /* from 0 */
    double best_score;                 /* the best epoch's score */
    int32_t stopped_early;             /* 1 when early stopping ended training before max_epochs */
    double training_loss;              /* the best solution's loss over each whole set (evaluate_best); */
    double validation_loss;            /* NaN when the set is absent or evaluate_best is 0 */
    double test_loss;
} shardopt_training_result;

/* Collective over the optimizer's world: trains with `model` as `options` say (see above). The
 * optimizer keeps the last epoch's parameters; the best solution is in the result. Every strategy,
 * async SGD included (per-step schedules there: the rate of the step that applies the update).
 * Errors: INVALID_ARGUMENT (NULL model or options, bad options naming the field, a
 * best_parameters_count that is not element_count), INVALID_STATE (the model or lr_fn failed here or
 * on a peer; a loss, averaged over the ranks, that is NaN or infinite: the message names the
 * dataset, epoch and step), and those of the collectives. */
SHARDOPT_API shardopt_status shardopt_optimizer_train(shardopt_optimizer opt, shardopt_batch_fn model,
                                                      void *user_data, const shardopt_training_options *options,
                                                      shardopt_training_result *result);

/* ---------------------------------------------------------------------------------------------
 * Checkpoints. All four are collective over the optimizer's communicator: every rank calls them
 * with the same arguments. A checkpoint saved by any world size and strategy loads into any
 * other (resharding). Files are checksummed and written atomically; a failed load changes
 * nothing (SHARDOPT_ERR_IO: unreadable/unwritable path or missing shard; SHARDOPT_ERR_CORRUPT:
 * bad magic, future version, truncation, checksum; SHARDOPT_ERR_INVALID_ARGUMENT: a layout that
 * does not match; SHARDOPT_ERR_INVALID_STATE: saving in the middle of gradient accumulation).
 * The files do not depend on the memory space: a checkpoint saved with host memory loads into an
 * optimizer with CUDA memory and the other way round.
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

/* A consolidated checkpoint's contents in torch.optim's terms, read from the bytes of
 * shardopt_optimizer_serialize (not collective; no optimizer needed): what a single-process torch
 * optimizer's state_dict() holds (docs/torch.md), named as shardopt-ckpt export names them. */
typedef struct shardopt_checkpoint_info {
    size_t struct_size;          /* set by the caller */
    int32_t tensor_count;        /* the layout's tensors, in its order */
    int32_t state_slots;         /* optimizer state slots per tensor */
    int64_t step_count;
    uint64_t element_count;      /* parameters (packed: no padding); each state slot holds as many */
    shardopt_dtype dtype;        /* of the parameters and the state */
    /* The strings below stay valid on the calling thread until its next call of _describe. */
    const char *optimizer;       /* the library's name of the optimizer ("adamw") */
    const char *torch_optimizer; /* torch.optim's class whose state this is, slot for slot ("AdamW", "SGD", "Adam",
                                  * "RMSprop", "Adagrad", "Adamax", "Adadelta"); "" when none is (LAMB and Lion have
                                  * no torch class; torch's NAdam also keeps mu_product; Adafactor, Muon) */
    const char *state_names;     /* torch's names of the slots, comma separated ("exp_avg,exp_avg_sq"); "state<k>"
                                  * where torch has none */
    int32_t torch_step;          /* 1: that class keeps a "step" per parameter (every one but SGD) */
} shardopt_checkpoint_info;

/* Describes serialized checkpoint bytes. Errors: INVALID_ARGUMENT (NULL, empty), CORRUPT. */
SHARDOPT_API shardopt_status shardopt_checkpoint_describe(const void *data, size_t size, shardopt_checkpoint_info *info);
/* Part `slot` of serialized checkpoint bytes, every tensor packed in the layout's order, into buffer: slot -1 the
 * parameters, 0 .. state_slots - 1 that state slot; count = element_count, dtype the checkpoint's. Checksums are
 * checked. Errors: INVALID_ARGUMENT (a slot out of range, another count or dtype), CORRUPT. */
SHARDOPT_API shardopt_status shardopt_checkpoint_read(const void *data, size_t size, int32_t slot, void *buffer,
                                                      size_t count, shardopt_dtype dtype);

/* ---------------------------------------------------------------------------------------------
 * Elastic training (docs/elastic.md): an optimizer made elastic checkpoints every k steps
 * without stopping training (its state copied to host memory at the step boundary, the files
 * written by background threads and published atomically once every rank has written them) and,
 * when it is made elastic, resumes from the latest complete checkpoint in its directory at
 * whatever world size the job now has (resharded). `shardopt-run --elastic --min N --max M
 * --checkpoint-dir D` restarts the ranks with the survivors when one dies or a host is cut off.
 * ------------------------------------------------------------------------------------------- */
/* Zero means default in every field. */
typedef struct shardopt_elastic_options {
    size_t struct_size;         /* set by _init */
    int32_t min_workers;        /* fewest ranks the job may run with; 0 = 1 */
    int32_t max_workers;        /* most ranks; 0 = 1024 */
    int32_t checkpoint_every;   /* optimizer steps between checkpoints; 0 = $SHARDOPT_CHECKPOINT_EVERY, else 100 */
    /* A directory every rank reads and writes (across hosts: a shared file system), one per
     * job; copied. NULL or "" = $SHARDOPT_CHECKPOINT_DIR (set by shardopt-run --checkpoint-dir). */
    const char *checkpoint_dir;
} shardopt_elastic_options;

/* Fills *opts with the defaults noted above; prefer the inline _init. Errors: INVALID_ARGUMENT. */
SHARDOPT_API shardopt_status shardopt_elastic_options_init_sized(shardopt_elastic_options *opts, size_t struct_size);
static inline shardopt_status shardopt_elastic_options_init(shardopt_elastic_options *opts) {
    return shardopt_elastic_options_init_sized(opts, sizeof *opts);
}

/* Checks the fields of *opts on their own, as make_elastic does (the directory is checked there: it
 * may come from the environment): INVALID_ARGUMENT naming the first bad field. */
SHARDOPT_API shardopt_status shardopt_elastic_options_validate(const shardopt_elastic_options *opts);
/* As shardopt_elastic_options_validate, and INVALID_ARGUMENT for min_workers or max_workers 0 (a default that _init
 * writes as a value, so a 0 there was the caller's). checkpoint_every 0 and checkpoint_dir NULL are _init's own. */
SHARDOPT_API shardopt_status shardopt_elastic_options_validate_strict(const shardopt_elastic_options *opts);

/* Collective: makes opt elastic (once). Checks the options and that the world size lies in
 * [min_workers, max_workers], then loads the latest complete checkpoint in the directory when
 * there is one, as shardopt_optimizer_load does (any world size and strategy); continue training
 * from shardopt_optimizer_step_count. From then on shardopt_optimizer_step and
 * shardopt_optimizer_optimize follow the checkpoint schedule after every step (one small
 * allreduce per step while a checkpoint is being written), and the first optimize after a resume
 * skips the iterations the checkpoint covers. Errors: INVALID_ARGUMENT (NULL, bad options, no
 * directory), INVALID_STATE (already elastic; a world size outside the range; inside optimize),
 * and those of shardopt_optimizer_load. */
SHARDOPT_API shardopt_status shardopt_optimizer_make_elastic(shardopt_optimizer opt,
                                                             const shardopt_elastic_options *options);

typedef struct shardopt_elastic_status {
    size_t struct_size;           /* set by the caller */
    int64_t resumed_step;         /* the step count loaded by make_elastic; -1: no checkpoint was there */
    int64_t last_checkpoint_step; /* the latest complete checkpoint (published or loaded); -1: none */
    int32_t checkpoint_pending;   /* 1 while a checkpoint is being written */
    int32_t generation;           /* restarts of the job before this run ($SHARDOPT_ELASTIC_GENERATION) */
    int32_t min_workers, max_workers, checkpoint_every; /* in force */
    int64_t checkpoints_published; /* by this process */
    /* The last published checkpoint: seconds copying the state at the step boundary, writing in
     * the background, and in the agreements between steps; bytes of the copy. */
    double snapshot_seconds, write_seconds, publish_seconds;
    uint64_t snapshot_bytes;
    const char *checkpoint_dir;   /* in force; owned by the optimizer */
} shardopt_elastic_status;

/* Not collective. Errors: INVALID_ARGUMENT (NULL), INVALID_STATE (not elastic). */
SHARDOPT_API shardopt_status shardopt_optimizer_elastic_status(shardopt_optimizer opt, shardopt_elastic_status *status);
/* Collective: an elastic optimizer's checkpoint now, at a step boundary (the previous one
 * finished first). Errors: INVALID_STATE (not elastic, mid gradient accumulation), IO. */
SHARDOPT_API shardopt_status shardopt_optimizer_checkpoint_now(shardopt_optimizer opt);
/* Collective: waits for the checkpoint being written, if any, and publishes it (at the end of
 * training). A failed write fails it on every rank (IO); the previous checkpoint stays. */
SHARDOPT_API shardopt_status shardopt_optimizer_finish_checkpoint(shardopt_optimizer opt);

/* ---------------------------------------------------------------------------------------------
 * The planner: which strategies fit a model on a cluster, and how long a step takes, before
 * anything runs (docs/planning.md; C++: shardopt/planner.hpp). Memory comes from the library's
 * own memory plan, the computation its up-front fit check uses, equal to memory_stats(); time from
 * an alpha-beta model of the library's algorithms. Not collective; no communicator needed.
 * ------------------------------------------------------------------------------------------- */
/* Zero means default in every field. A cluster profile (./dev bench calibrate, or written by hand:
 * docs/planning.md) gives the defaults of the fields left 0. */
typedef struct shardopt_plan_cluster {
    size_t struct_size;              /* set by the caller: sizeof(shardopt_plan_cluster) */
    int32_t hosts;                   /* 0 = 1 (the profile's) */
    int32_t ranks_per_host;          /* 0 = 1 (the profile's); GPUs per host with CUDA memory */
    shardopt_memory_space memory;    /* HOST: CPU ranks; CUDA: one GPU per rank */
    uint64_t device_memory_bytes;    /* a GPU's memory; required with CUDA memory */
    uint64_t host_memory_bytes;      /* a host's, shared by its ranks; 0 = not checked */
    double intra_bandwidth;          /* bytes/s between the ranks of a host; 0 = 10e9 */
    double intra_latency;            /* seconds; 0 = 2e-6 */
    double inter_bandwidth;          /* bytes/s of a host's link to the others; 0 = 12.5e9 */
    double inter_latency;            /* seconds; 0 = 20e-6 */
    double update_bandwidth;         /* a rank's CPU update, bytes through memory per s; 0 = 10e9 */
    double gpu_update_bandwidth;     /* a GPU's update; 0 = 2.5e12 */
    double pcie_bandwidth;           /* a GPU's copies to and from host memory; 0 = 25e9 */
    const char *profile_json;        /* a cluster profile (JSON text), or NULL */
} shardopt_plan_cluster;

typedef struct shardopt_plan_request {
    size_t struct_size;              /* set by the caller: sizeof(shardopt_plan_request) */
    shardopt_params layout;          /* the model's tensors (unplanned), or NULL for... */
    double parameters;               /* ...a transformer of this many parameters */
    int32_t layers, hidden;          /* its shape; 0 = typical for the count */
    int32_t sequence, micro_batch;   /* activations between stages and tensor ranks; 0 = none, 1 */
    shardopt_dtype dtype;            /* with parameters: F32 (0) or F64; a layout gives its own */
    const shardopt_optimizer_options *optimizer; /* NULL = Adam with its defaults */
    /* The options every candidate starts from (buckets, staging, prefetch, accumulation,
     * compression); NULL = defaults. With search DISABLE, the one candidate (strategy and grid). */
    const shardopt_sharding_options *sharding;
    double compute_seconds;          /* forward + backward of one step on one rank */
    uint64_t reserve_bytes;          /* memory a rank keeps besides the optimizer's */
    shardopt_switch search;          /* AUTO = on: every strategy, grid and offload variant */
} shardopt_plan_request;

/* One candidate: its memory per rank (the rank holding the most), its traffic and step time. */
typedef struct shardopt_plan_entry {
    size_t struct_size;              /* set by the caller: sizeof(shardopt_plan_entry) */
    char name[96];                   /* "zero2", "hybrid pp2 tp4 dp8 zero1", "fsdp +offload", ... */
    int32_t fits;                    /* 1 when it fits the GPU's (or host's) memory */
    shardopt_strategy strategy, hybrid_data_strategy;
    int32_t pipeline_parallel_size, tensor_parallel_size, data_parallel_size, hsdp_replicas;
    int32_t cpu_offload_optimizer, cpu_offload_gradients, cpu_offload_params;
    /* As shardopt_memory_stats counts them. */
    uint64_t params_bytes, grads_bytes, optimizer_state_bytes, buffer_bytes, compression_bytes;
    uint64_t host_params_bytes, host_grads_bytes, host_optimizer_state_bytes;
    uint64_t device_bytes;           /* in the rank's memory space (the GPU, or host memory) */
    uint64_t host_bytes;             /* in host memory besides (ZeRO-Offload) */
    uint64_t sent_intra_bytes, sent_inter_bytes; /* per rank and step, inside / between hosts */
    double step_seconds;             /* the predicted step: the sum of the parts below */
    double compute_seconds, exposed_comm_seconds, update_seconds, post_update_seconds;
    double bubble_seconds, tensor_comm_seconds;
    double reduce_comm_seconds;      /* the gradient reduction alone, hidden or not */
} shardopt_plan_entry;

typedef struct shardopt_plan_s *shardopt_plan;

/* The candidates, those that fit first, fastest first. Errors: INVALID_ARGUMENT naming what is
 * wrong (no parameters, an impossible shape, a zero bandwidth, a bad profile). */
SHARDOPT_API shardopt_status shardopt_plan_create(const shardopt_plan_request *request,
                                                  const shardopt_plan_cluster *cluster, shardopt_plan *out);
SHARDOPT_API shardopt_status shardopt_plan_destroy(shardopt_plan plan);
/* *count: the candidates; *fitting (may be NULL): how many of them fit. */
SHARDOPT_API shardopt_status shardopt_plan_count(shardopt_plan plan, int32_t *count, int32_t *fitting);
/* Candidate `index` (0 = the fastest that fits). entry->struct_size must be set. */
SHARDOPT_API shardopt_status shardopt_plan_entry_get(shardopt_plan plan, int32_t index, shardopt_plan_entry *entry);
/* What world rank `rank` of a job of `world_size` ranks would hold once it has run a step, for
 * the arguments shardopt_optimizer_create takes (optimizer and sharding may be NULL: defaults):
 * equal, field for field, to that rank's shardopt_optimizer_memory_stats. */
SHARDOPT_API shardopt_status shardopt_plan_rank_memory(shardopt_params params,
                                                       const shardopt_optimizer_options *optimizer,
                                                       const shardopt_sharding_options *sharding, int32_t world_size,
                                                       int32_t rank, shardopt_memory_stats *stats);

/* ---------------------------------------------------------------------------------------------
 * Checkpoints as a stream (docs/checkpoints.md): shardopt_optimizer_serialize's bytes without
 * holding them. No rank holds more than its own parts and one window
 * (SHARDOPT_CHECKPOINT_WINDOW_BYTES, 32 MiB by default), so a model larger than any rank's memory
 * serializes to a file or a socket. shardopt_optimizer_deserialize reads its bytes from memory (or
 * a mapped file); shardopt_optimizer_load reads a saved checkpoint a window at a time.
 * ------------------------------------------------------------------------------------------- */
/* Writer callback: the next `size` bytes of the stream, in order (at most a window per call).
 * Return 0 to go on; any other value stops the calls on this rank, and once the stream is over
 * the serialize call fails with SHARDOPT_ERR_IO on every rank, naming this rank, the value and
 * the reason the writer gave with shardopt_model_error before returning (when it gave one). */
typedef int (*shardopt_write_fn)(void *user_data, const void *data, size_t size);
/* Collective: the bytes shardopt_optimizer_serialize returns, identical on every rank, to `write`
 * (called on this rank's thread). write may be NULL on ranks that want none: their parts still
 * reach the others. Errors: INVALID_ARGUMENT (NULL optimizer), INVALID_STATE (mid gradient
 * accumulation), IO (a writer returned nonzero). */
SHARDOPT_API shardopt_status shardopt_optimizer_serialize_to(shardopt_optimizer opt, shardopt_write_fn write,
                                                             void *user_data);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SHARDOPT_H */

/* ---------------------------------------------------------------------------------------------
 * Experimental part: declared only under SHARDOPT_EXPERIMENTAL (see the top of this file). These
 * functions may change or go in any minor release. (Outside the include guard, so a second
 * inclusion with SHARDOPT_EXPERIMENTAL defined still declares them.)
 * ------------------------------------------------------------------------------------------- */
#if defined(SHARDOPT_EXPERIMENTAL) && !defined(SHARDOPT_H_EXPERIMENTAL)
#define SHARDOPT_H_EXPERIMENTAL

#ifdef __cplusplus
extern "C" {
#endif

/* In-process groups joined by name: rank `rank` of the in-process group `group_id` of `size`
 * ranks claims its communicator, so each rank's thread can create its own handle without the
 * others' (shardopt_comm_create_inprocess hands out all at once). The first claim of an id
 * creates the group in a process-wide registry; each rank claims its handle once, in any order
 * and from any thread; once all `size` handles are claimed the registry forgets the group, and
 * the id names a new group at its next claim. The handle is the caller's to destroy. A group
 * whose ranks are not all claimed stays in the registry until the process exits.
 * Errors: INVALID_ARGUMENT (group_id or out NULL, size < 1, rank outside [0, size), a size
 * other than the group's, a rank already claimed), OUT_OF_MEMORY. */
SHARDOPT_API shardopt_status shardopt_comm_create_inprocess_member(const char *group_id, int rank, int size,
                                                                   shardopt_comm *out);

/* Pipeline parallelism (docs/pipeline.md): the caller's model chunk on each pipeline rank of a
 * hybrid optimizer (pipeline_parallel_size > 1), given as forward/backward callbacks; a pipeline
 * runs one batch at a time through a schedule, moving activations between neighbouring stages,
 * summing the parameter gradients of the micro-batches and ending with one optimizer step. */
typedef enum shardopt_pipeline_schedule {
    SHARDOPT_PIPELINE_1F1B = 0,            /* the default: at most pp micro-batches held */
    SHARDOPT_PIPELINE_GPIPE = 1,           /* every forward, then every backward */
    SHARDOPT_PIPELINE_INTERLEAVED_1F1B = 2 /* virtual_stages chunks per rank, a smaller bubble */
} shardopt_pipeline_schedule;

/* Zero means default in every field. */
typedef struct shardopt_pipeline_options {
    size_t struct_size;                  /* sizeof(shardopt_pipeline_options) */
    int32_t num_micro_batches;           /* 0 = the pipeline depth */
    shardopt_pipeline_schedule schedule; /* 0 = 1F1B */
    int32_t virtual_stages;              /* chunks per rank; 0 = 1 (2 for interleaved 1F1B) */
} shardopt_pipeline_options;

/* What a callback is called for. Activations are elements of the optimizer's dtype. */
typedef struct shardopt_stage_call {
    size_t struct_size;  /* sizeof(shardopt_stage_call) of the library */
    int32_t micro_batch;
    int32_t chunk;       /* this rank's chunk, 0..virtual_stages-1 */
    int32_t model_chunk; /* its place in the model: chunk * pp + pipeline rank */
    int32_t first;       /* 1 on the model's first chunk: no input */
    int32_t last;        /* 1 on the model's last chunk: computes the loss, no output */
    void *internal;      /* the library's; read through shardopt_stage_call_grad */
} shardopt_stage_call;

typedef struct shardopt_activation_s *shardopt_activation;

/* Forward of call->chunk on call->micro_batch: input[0..input_count) (none on the first chunk)
 * -> output, sized with shardopt_activation_resize (left empty on the last chunk, which stores
 * the micro-batch's loss in *loss). Return 0; anything else fails the batch on every stage. */
typedef int (*shardopt_stage_forward_fn)(void *user_data, const shardopt_stage_call *call, const void *input,
                                         size_t input_count, shardopt_activation output, double *loss);
/* Backward of the same chunk and micro-batch: output_grad (none on the last chunk) -> input_grad
 * (input_count elements; nothing to write on the first chunk), adding the parameter gradients
 * into shardopt_stage_call_grad's buffers. `input` is what the forward got. */
typedef int (*shardopt_stage_backward_fn)(void *user_data, const shardopt_stage_call *call, const void *input,
                                          size_t input_count, const void *output_grad, size_t output_grad_count,
                                          void *input_grad);

typedef struct shardopt_pipeline_stage {
    size_t struct_size; /* sizeof(shardopt_pipeline_stage) */
    shardopt_stage_forward_fn forward;
    shardopt_stage_backward_fn backward;
    void *user_data;
} shardopt_pipeline_stage;

typedef struct shardopt_pipeline_result {
    size_t struct_size;     /* set by the caller */
    double loss;            /* mean of the last chunk's micro-batch losses (every stage) */
    int32_t step_applied;   /* 1 when the batch's optimizer step updated the parameters */
    double busy_seconds;    /* this rank, inside the callbacks */
    double wait_seconds;    /* this rank, waiting for activations and gradients */
    double span_seconds;    /* this rank, from the batch's start to its last action */
    double bubble_fraction; /* the pipeline: 1 - summed busy / (stages x longest span) */
    int32_t peak_activations; /* most forwards this rank held before their backward */
    int32_t sends;
    int32_t recvs;
} shardopt_pipeline_result;

typedef struct shardopt_pipeline_s *shardopt_pipeline;

/* Collective over the optimizer's pipeline group. The optimizer: host memory, f32/f64, no
 * gradient accumulation of its own; it and the callbacks' user_data must outlive the pipeline.
 * Errors: INVALID_ARGUMENT (NULLs, bad options), MISMATCH (stages with other options),
 * UNSUPPORTED (CUDA memory, other dtypes). */
SHARDOPT_API shardopt_status shardopt_pipeline_create(shardopt_optimizer opt, const shardopt_pipeline_stage *stage,
                                                      const shardopt_pipeline_options *options,
                                                      shardopt_pipeline *out);
/* INVALID_STATE while a batch of the pipeline runs (from a stage). */
SHARDOPT_API shardopt_status shardopt_pipeline_destroy(shardopt_pipeline pipeline);
/* Collective over the optimizer's world: one batch and one optimizer step; result may be NULL.
 * A failing callback or stage aborts the pipeline group, so every stage returns an error at once
 * (INVALID_STATE naming the rank and the callback's return code, or shardopt_model_error's
 * message when the callback set one). While the batch runs the optimizer is the batch's, as it is
 * its training loop's inside train: a call that changes it or is collective (destroy included),
 * from a stage or another thread, is INVALID_STATE ("not while a pipeline batch is running on this
 * optimizer"); so is run_batch from a stage. A stage may read it (queries, tensor_parameters). */
SHARDOPT_API shardopt_status shardopt_pipeline_run_batch(shardopt_pipeline pipeline, shardopt_pipeline_result *result);
/* From a forward callback: sets the output's element count and returns its buffer in *data. */
SHARDOPT_API shardopt_status shardopt_activation_resize(shardopt_activation output, size_t count, void **data);
/* From a backward callback: the gradient of tensor `tensor` of the optimizer's layout, summed
 * over the batch's micro-batches (add into it); *count (may be NULL) = its elements. */
SHARDOPT_API shardopt_status shardopt_stage_call_grad(const shardopt_stage_call *call, int tensor, void **grad,
                                                      size_t *count);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SHARDOPT_EXPERIMENTAL */

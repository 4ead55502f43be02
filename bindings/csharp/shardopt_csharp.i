/* shardopt_csharp.i — the C# half of the SWIG interface (bindings/shardopt.i includes it): the C ABI
 * (capi/include/shardopt.h) wrapped function for function, with typemaps instead of a second ABI.
 * The generated class Shardopt.Native.shardopt_native holds every shardopt_* function under its C name;
 * the layer in src/ (Shardopt.DistributedTraining) calls them and adds only C# idiom.
 *  - A shardopt_status return becomes void, and a failure an exception made on the calling thread from the
 *    library's message, status and rank (the layer's IShardoptException types, src/Native.cs): INVALID_ARGUMENT ->
 *    ArgumentException, TIMEOUT -> TimeoutException, IO and CORRUPT -> IOException, UNSUPPORTED ->
 *    NotSupportedException, OUT_OF_MEMORY -> OutOfMemoryException, others -> InvalidOperationException;
 *    the message reads "SHARDOPT_ERR_X: <library message>".
 *  - Output pointers become `out` arguments: numbers, handles (the SWIG handle objects, null for NULL)
 *    and addresses of library memory (IntPtr).
 *  - Caller memory (void *), function pointers and the history buffers are IntPtr: the layer pins typed
 *    spans and arrays after checking their element type (and the lengths the library cannot see: the
 *    library checks every count it is given), and passes delegates' function
 *    pointers (Marshal.GetFunctionPointerForDelegate) as the callbacks: the batch callback, lr_fn, the
 *    pipeline stages and serialize_to's writer are C# delegates called by the library directly, so no C
 *    trampoline is needed.
 *  - The structs are proxies over C memory; SHARDOPT_SIZEOF_<struct> is the library's sizeof, for the
 *    _init functions and the struct_size of output structs.
 * Nothing here states a default, a range or a rule: they are the C ABI's. */

%{
#define SHARDOPT_EXPERIMENTAL /* shardopt_comm_create_inprocess_member, the pipeline */
#include "shardopt.h"
%}

%include "typemaps.i"
%include "enumsimple.swg"
%csconst(1);
%apply long long { int64_t };
%apply int { int32_t };
%apply unsigned long long { size_t, uint64_t }; /* C# ulong: 64 bits, as size_t is here */

/* ---- status: a failure is an exception, raised on the thread whose call failed ---- */
%typemap(ctype, out="int") shardopt_status "int"
%typemap(imtype, out="int") shardopt_status "int"
%typemap(cstype, out="void") shardopt_status "int"
%typemap(out) shardopt_status %{ $result = (int)$1; %}
%typemap(csout, excode=SWIGEXCODE) shardopt_status {
    int so_status = $imcall;$excode
    if (so_status != 0) throw $imclassname.Failure(so_status);
  }
/* The exception of a failed call, made on its thread right after it (the library's error is thread-local). */
%pragma(csharp) imclasscode=%{
  internal static global::System.Exception Failure(int status) {
    string m = shardopt_native.shardopt_status_name(status) + ": " + shardopt_native.shardopt_last_error_message();
    int rank = shardopt_native.shardopt_last_error_rank();
    switch (status) {
      case shardopt_native.SHARDOPT_ERR_INVALID_ARGUMENT: return new global::Shardopt.DistributedTraining.ShardoptArgumentException(m, status, rank);
      case shardopt_native.SHARDOPT_ERR_TIMEOUT: return new global::Shardopt.DistributedTraining.ShardoptTimeoutException(m, status, rank);
      case shardopt_native.SHARDOPT_ERR_IO: case shardopt_native.SHARDOPT_ERR_CORRUPT: return new global::Shardopt.DistributedTraining.ShardoptIOException(m, status, rank);
      case shardopt_native.SHARDOPT_ERR_UNSUPPORTED: return new global::Shardopt.DistributedTraining.ShardoptNotSupportedException(m, status, rank);
      case shardopt_native.SHARDOPT_ERR_OUT_OF_MEMORY: return new global::Shardopt.DistributedTraining.ShardoptOutOfMemoryException(m, status, rank);
      default: return new global::Shardopt.DistributedTraining.ShardoptInvalidOperationException(m, status, rank);
    }
  }
%}

/* ---- outputs ---- */
%apply int *OUTPUT { int *rank, int *size, int *index, int *count, int *bucket, int *stop, int *done, int *device,
                     shardopt_memory_space *memory };
%apply unsigned long long *OUTPUT { size_t *count, size_t *padded_count, size_t *size, uint64_t *bytes, size_t *recv_count };
%apply long long *OUTPUT { int64_t *steps };
%apply double *OUTPUT { double *lr };
%apply int *OUTPUT { int32_t *count, int32_t *fitting };

/* Handles: out SWIGTYPE_p_<handle>, null when the library wrote NULL (split with a negative color). */
%define SO_HANDLE_OUT(HANDLE, PROXY)
%typemap(ctype) HANDLE *OUT "void **"
%typemap(imtype) HANDLE *OUT "out global::System.IntPtr"
%typemap(cstype) HANDLE *OUT "out PROXY"
%typemap(in) HANDLE *OUT %{ $1 = (HANDLE *)$input; %}
%typemap(csin, pre="    global::System.IntPtr ptr_$csinput = global::System.IntPtr.Zero;",
         post="      $csinput = ptr_$csinput == global::System.IntPtr.Zero ? null : new PROXY(ptr_$csinput, false);")
    HANDLE *OUT "out ptr_$csinput"
%apply HANDLE *OUT { HANDLE *comm, HANDLE *out };
%enddef
SO_HANDLE_OUT(shardopt_comm, SWIGTYPE_p_shardopt_comm_s)
SO_HANDLE_OUT(shardopt_params, SWIGTYPE_p_shardopt_params_s)
SO_HANDLE_OUT(shardopt_optimizer, SWIGTYPE_p_shardopt_optimizer_s)
SO_HANDLE_OUT(shardopt_pipeline, SWIGTYPE_p_shardopt_pipeline_s)
SO_HANDLE_OUT(shardopt_plan, SWIGTYPE_p_shardopt_plan_s)

/* Library memory: out IntPtr (parameters, gradients, a gathered unit, serialized bytes, an activation). */
%typemap(ctype) void **OUT "void **"
%typemap(imtype) void **OUT "out global::System.IntPtr"
%typemap(cstype) void **OUT "out global::System.IntPtr"
%typemap(in) void **OUT %{ $1 = $input; %}
%typemap(csin) void **OUT "out $csinput"
%apply void **OUT { void **params, void **grad, void **data, void **recv, void **cuda_stream };

/* ---- caller memory, callbacks and opaque call-scoped handles: IntPtr ---- */
%apply void *VOID_INT_PTR { void *, const void *, const int64_t *samples, shardopt_activation,
                            double *training_loss_history, double *validation_loss_history,
                            double *learning_rate_history, shardopt_batch_fn, shardopt_lr_fn,
                            shardopt_stage_forward_fn, shardopt_stage_backward_fn, shardopt_write_fn }

/* ---- sizes of the structs, the library's ---- */
%csconst(0);
%define SO_SIZEOF(NAME, TYPE) %constant unsigned long long SHARDOPT_SIZEOF_##NAME = sizeof(TYPE); %enddef
SO_SIZEOF(OPTIMIZER_OPTIONS, shardopt_optimizer_options)
SO_SIZEOF(SHARDING_OPTIONS, shardopt_sharding_options)
SO_SIZEOF(TRAINING_OPTIONS, shardopt_training_options)
SO_SIZEOF(TRAINING_RESULT, shardopt_training_result)
SO_SIZEOF(STEP_RESULT, shardopt_step_result)
SO_SIZEOF(MEMORY_STATS, shardopt_memory_stats)
SO_SIZEOF(ELASTIC_STATUS, shardopt_elastic_status)
SO_SIZEOF(PIPELINE_OPTIONS, shardopt_pipeline_options)
SO_SIZEOF(PIPELINE_STAGE, shardopt_pipeline_stage)
SO_SIZEOF(PIPELINE_RESULT, shardopt_pipeline_result)
SO_SIZEOF(PLAN_CLUSTER, shardopt_plan_cluster)
SO_SIZEOF(PLAN_REQUEST, shardopt_plan_request)
SO_SIZEOF(PLAN_ENTRY, shardopt_plan_entry)
SO_SIZEOF(CHECKPOINT_INFO, shardopt_checkpoint_info)
%csconst(1);

/* Not used from C# (arrays of handles, the asynchronous forms, optimize(): train() replaced it). */
%ignore shardopt_comm_create_inprocess;
%rename("$ignore", regextarget=1) "_async$";
%rename("$ignore", regextarget=1) "^shardopt_work_";
%rename("$ignore", regextarget=1) "^shardopt_optimize_";
%ignore shardopt_optimizer_optimize;
%ignore shardopt_model_fn;

#define SHARDOPT_API
#define SHARDOPT_EXPERIMENTAL
%include "shardopt.h"

/* shardopt_java.i — the java half of the SWIG interface (bindings/shardopt.i includes it). */
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
static __thread jthrowable so_java_exc;

static void so_java_throw(JNIEnv *jenv) {
    const char *cls;
    jclass c;
    if (so_err_status == SO_ERR_FOREIGN && so_java_exc) {
        (*jenv)->Throw(jenv, so_java_exc);
        (*jenv)->DeleteGlobalRef(jenv, so_java_exc);
        so_java_exc = NULL;
        return;
    }
    switch (so_err_status) {
    case SHARDOPT_ERR_INVALID_ARGUMENT: cls = "java/lang/IllegalArgumentException"; break;
    /* checked, so the layer's save/load/serialize methods declare `throws IOException` */
    case SHARDOPT_ERR_IO: case SHARDOPT_ERR_CORRUPT: cls = "java/io/IOException"; break;
    case SHARDOPT_ERR_UNSUPPORTED: cls = "java/lang/UnsupportedOperationException"; break;
    case SHARDOPT_ERR_OUT_OF_MEMORY: cls = "java/lang/OutOfMemoryError"; break;
    default: cls = "java/lang/IllegalStateException"; break;
    }
    c = (*jenv)->FindClass(jenv, cls);
    if (c) (*jenv)->ThrowNew(jenv, c, so_err_msg);
}

/* A Java buffer argument: a direct java.nio.Buffer (no copy) or a float[]/double[]/long[]/int[]/
 * byte[] (elements pinned or copied by the JVM, and written back for WBUF); null = NULL. */
typedef struct so_java_buf {
    jarray array;
    void *elems;
    int kind; /* 0 none, 'F','D','J','I','B' */
} so_java_buf;

static int so_java_buf_in(JNIEnv *jenv, jobject obj, void **out, so_java_buf *b) {
    static const struct { const char *sig; int kind; } kinds[] = {
        {"[F", 'F'}, {"[D", 'D'}, {"[J", 'J'}, {"[I", 'I'}, {"[B", 'B'}};
    size_t i;
    b->array = NULL; b->elems = NULL; b->kind = 0;
    if (!obj) { *out = NULL; return 0; }
    *out = (*jenv)->GetDirectBufferAddress(jenv, obj);
    if (*out) return 0;
    for (i = 0; i < sizeof kinds / sizeof kinds[0]; ++i) {
        jclass c = (*jenv)->FindClass(jenv, kinds[i].sig);
        if (c && (*jenv)->IsInstanceOf(jenv, obj, c)) {
            b->array = (jarray)obj;
            b->kind = kinds[i].kind;
            switch (b->kind) {
            case 'F': b->elems = (*jenv)->GetFloatArrayElements(jenv, (jfloatArray)obj, NULL); break;
            case 'D': b->elems = (*jenv)->GetDoubleArrayElements(jenv, (jdoubleArray)obj, NULL); break;
            case 'J': b->elems = (*jenv)->GetLongArrayElements(jenv, (jlongArray)obj, NULL); break;
            case 'I': b->elems = (*jenv)->GetIntArrayElements(jenv, (jintArray)obj, NULL); break;
            default: b->elems = (*jenv)->GetByteArrayElements(jenv, (jbyteArray)obj, NULL); break;
            }
            if (!b->elems) return -1;
            *out = b->elems;
            return 0;
        }
    }
    {
        jclass iae = (*jenv)->FindClass(jenv, "java/lang/IllegalArgumentException");
        if (iae) (*jenv)->ThrowNew(jenv, iae, "expected a direct java.nio.Buffer or a primitive array");
    }
    return -1;
}

static void so_java_buf_release(JNIEnv *jenv, so_java_buf *b, int mode) {
    if (!b->elems) return;
    switch (b->kind) {
    case 'F': (*jenv)->ReleaseFloatArrayElements(jenv, (jfloatArray)b->array, (jfloat *)b->elems, mode); break;
    case 'D': (*jenv)->ReleaseDoubleArrayElements(jenv, (jdoubleArray)b->array, (jdouble *)b->elems, mode); break;
    case 'J': (*jenv)->ReleaseLongArrayElements(jenv, (jlongArray)b->array, (jlong *)b->elems, mode); break;
    case 'I': (*jenv)->ReleaseIntArrayElements(jenv, (jintArray)b->array, (jint *)b->elems, mode); break;
    default: (*jenv)->ReleaseByteArrayElements(jenv, (jbyteArray)b->array, (jbyte *)b->elems, mode); break;
    }
    b->elems = NULL;
}

typedef struct so_java_model {
    JavaVM *vm;
    jobject model;
    jmethodID method;
    size_t param_bytes;
} so_java_model;

/* Tells the library why the callback failed (the exception's toString(): its class and message), so
 * optimize's error on every other rank names this rank and the reason. */
static void so_java_model_error(JNIEnv *env, jthrowable t) {
    jclass c = (*env)->FindClass(env, "java/lang/Object");
    jmethodID ts = c ? (*env)->GetMethodID(env, c, "toString", "()Ljava/lang/String;") : NULL;
    jstring js = ts ? (jstring)(*env)->CallObjectMethod(env, t, ts) : NULL;
    const char *msg = NULL;
    if ((*env)->ExceptionCheck(env)) (*env)->ExceptionClear(env);
    if (js) msg = (*env)->GetStringUTFChars(env, js, NULL);
    shardopt_model_error(msg ? msg : "a Java exception (toString() failed)");
    if (msg) (*env)->ReleaseStringUTFChars(env, js, msg);
    if (js) (*env)->DeleteLocalRef(env, js);
    if (c) (*env)->DeleteLocalRef(env, c);
}

/* shardopt_model_fn calling model.evaluate(ByteBuffer params, ByteBuffer grad, ByteBuffer samples) */
static int so_java_model_call(void *user_data, const void *params, void *grad, const int64_t *samples,
                              size_t n, double *loss) {
    so_java_model *m = (so_java_model *)user_data;
    JNIEnv *env = NULL;
    jobject p, g, s;
    jdouble v;
    if ((*m->vm)->GetEnv(m->vm, (void **)&env, JNI_VERSION_1_6) != JNI_OK &&
        (*m->vm)->AttachCurrentThread(m->vm, (void **)&env, NULL) != JNI_OK)
        return 1;
    p = (*env)->NewDirectByteBuffer(env, (void *)params, (jlong)m->param_bytes);
    g = (*env)->NewDirectByteBuffer(env, grad, (jlong)m->param_bytes);
    s = (*env)->NewDirectByteBuffer(env, (void *)samples, (jlong)(n * sizeof(int64_t)));
    v = (p && g && s) ? (*env)->CallDoubleMethod(env, m->model, m->method, p, g, s) : 0;
    if (p) (*env)->DeleteLocalRef(env, p);
    if (g) (*env)->DeleteLocalRef(env, g);
    if (s) (*env)->DeleteLocalRef(env, s);
    if ((*env)->ExceptionCheck(env)) {
        jthrowable t = (*env)->ExceptionOccurred(env);
        (*env)->ExceptionClear(env);
        so_java_model_error(env, t);
        if (!so_java_exc) so_java_exc = (jthrowable)(*env)->NewGlobalRef(env, t);
        (*env)->DeleteLocalRef(env, t);
        return 1;
    }
    *loss = v;
    return 0;
}
%}

%{
#include <signal.h>
/* The JVM turns SIGSEGV/SIGBUS/SIGILL/SIGFPE in Java code into NullPointerException and friends. Loading
 * libshardopt loads UCX, whose error handling (UCX_HANDLE_ERRORS=bt) replaces those handlers, so a plain
 * Java NPE would kill the process. Put the JVM's handler back: it is the one it also installed for SIGPIPE,
 * which UCX leaves alone. */
JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM *vm, void *reserved) {
    struct sigaction jvm;
    static const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE};
    size_t i;
    (void)vm; (void)reserved;
    if (sigaction(SIGPIPE, NULL, &jvm) == 0 && (jvm.sa_flags & SA_SIGINFO) && jvm.sa_sigaction != NULL) {
        for (i = 0; i < sizeof sigs / sizeof sigs[0]; ++i) sigaction(sigs[i], &jvm, NULL);
    }
    return JNI_VERSION_1_6;
}
%}

/* No `return` after the throw: the wrapper falls through to release pinned arrays (freearg);
 * the pending Java exception is raised when the native method returns. */
%exception {
    so_err_status = 0;
    $action
    if (so_err_status) so_java_throw(jenv);
}

%typemap(jni) void *WBUF, const void *RBUF, jobject MODEL "jobject"
%typemap(jtype) void *WBUF, const void *RBUF, jobject MODEL "Object"
%typemap(jstype) void *WBUF, const void *RBUF, jobject MODEL "Object"
%typemap(javain) void *WBUF, const void *RBUF, jobject MODEL "$javainput"
%typemap(in) void *WBUF (so_java_buf buf = {0}) {
    if (so_java_buf_in(jenv, $input, &$1, &buf) != 0) return $null;
}
%typemap(freearg) void *WBUF { so_java_buf_release(jenv, &buf$argnum, 0); }
%typemap(in) const void *RBUF (so_java_buf buf = {0}) {
    void *p_ = NULL;
    if (so_java_buf_in(jenv, $input, &p_, &buf) != 0) return $null;
    $1 = p_;
}
%typemap(freearg) const void *RBUF { so_java_buf_release(jenv, &buf$argnum, JNI_ABORT); }
%typemap(in) jobject MODEL { $1 = $input; }
%typemap(in, numinputs=0) JNIEnv *JENV { $1 = jenv; }

%typemap(jni) so_bytes "jobject"
%typemap(jtype) so_bytes "java.nio.ByteBuffer"
%typemap(jstype) so_bytes "java.nio.ByteBuffer"
%typemap(out) so_bytes {
    $result = $1.ptr ? (*jenv)->NewDirectByteBuffer(jenv, $1.ptr, (jlong)$1.bytes) : NULL;
}
%typemap(javaout) so_bytes { return $jnicall; }

/* load the JNI library from the layer (NativeLoader), not from a static block here */
%pragma(java) jniclassclassmodifiers="public final class"


/* ------------------------------------------------------------------------------------------------
 * The option and result structs of shardopt.h (fields as in C), and its enums; no raw functions.
 * ---------------------------------------------------------------------------------------------- */
/* C enums as plain int constants everywhere (the layers define their own enums) */
%include "enumtypeunsafe.swg"
%javaconst(1);
%apply long long { int64_t };
%apply int { int32_t };
%apply unsigned long { size_t };   /* Java long, Python int */
%apply long long { uint64_t };     /* Java long rather than BigInteger */
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
/* model.evaluate(ByteBuffer params, ByteBuffer grad, ByteBuffer samples) -> double */
void so_optimize_java(JNIEnv *JENV, shardopt_optimizer opt, jobject MODEL, size_t element_size,
                      const shardopt_optimize_options *options, shardopt_optimize_result *result,
                      void *best, size_t best_count, void *history, size_t history_capacity) {
    so_java_model m;
    size_t n = 0;
    shardopt_status st;
    jclass cls;
    SO_TRY(shardopt_optimizer_element_count(opt, &n, NULL), SO_VOID);
    if (!MODEL) { so_fail(SHARDOPT_ERR_INVALID_ARGUMENT, "model is null"); return; }
    cls = (*JENV)->GetObjectClass(JENV, MODEL);
    m.method = (*JENV)->GetMethodID(JENV, cls, "evaluate",
                                    "(Ljava/nio/ByteBuffer;Ljava/nio/ByteBuffer;Ljava/nio/ByteBuffer;)D");
    if (!m.method) {
        (*JENV)->ExceptionClear(JENV);
        so_fail(SHARDOPT_ERR_INVALID_ARGUMENT, "model has no method double evaluate(ByteBuffer, ByteBuffer, ByteBuffer)");
        return;
    }
    (*JENV)->GetJavaVM(JENV, &m.vm);
    m.model = MODEL;
    m.param_bytes = n * element_size;
    st = so_optimize_common(opt, so_java_model_call, &m, options, result, best, best_count, history, history_capacity);
#define so_foreign_pending (so_java_exc != NULL)
    SO_OPTIMIZE_FINISH(st);
#undef so_foreign_pending
}

/* The Java layer checks its arrays for length and element type before they reach the shared
 * helpers (so_reduce_scatter, so_send, so_recv). */
/* The UCX backend for a world of one process, asked for explicitly (no launcher environment). */
shardopt_comm so_java_comm_ucx_single(void) {
    shardopt_comm c = NULL;
    const char *ws = getenv("SHARDOPT_WORLD_SIZE");
    if (ws && strcmp(ws, "1") != 0) {
        so_fail(SHARDOPT_ERR_INVALID_ARGUMENT, "a single-process UCX world was asked for, but SHARDOPT_WORLD_SIZE=%s is set "
                "(launched by tools/shardopt-run?): use new UcxCommunicationBackend() instead", ws);
        return NULL;
    }
    if (!ws) setenv("SHARDOPT_WORLD_SIZE", "1", 1);
    SO_TRY(shardopt_comm_create_from_env("ucx", &c), NULL);
    return c;
}
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
typedef struct so_java_stage {
    JavaVM *vm;
    jobject bridge; /* global reference */
    jmethodID forward, backward;
    shardopt_optimizer opt;
    size_t element_size;
} so_java_stage;

static JNIEnv *so_java_env(JavaVM *vm) {
    JNIEnv *env = NULL;
    if ((*vm)->GetEnv(vm, (void **)&env, JNI_VERSION_1_6) != JNI_OK &&
        (*vm)->AttachCurrentThread(vm, (void **)&env, NULL) != JNI_OK)
        return NULL;
    return env;
}

static void so_java_stage_free(void *p) {
    so_java_stage *s = (so_java_stage *)p;
    JNIEnv *env = so_java_env(s->vm);
    if (env && s->bridge) (*env)->DeleteGlobalRef(env, s->bridge);
    free(s);
}

/* After a Java call: 0, or 1 with the exception kept to rethrow from run (the library told why). */
static int so_java_stage_failed(JNIEnv *env) {
    jthrowable t;
    if (!(*env)->ExceptionCheck(env)) return 0;
    t = (*env)->ExceptionOccurred(env);
    (*env)->ExceptionClear(env);
    so_java_model_error(env, t);
    if (!so_java_exc) so_java_exc = (jthrowable)(*env)->NewGlobalRef(env, t);
    (*env)->DeleteLocalRef(env, t);
    return 1;
}

static jobject so_java_buffer(JNIEnv *env, const void *p, size_t count, size_t element_size) {
    return (*env)->NewDirectByteBuffer(env, SO_STAGE_ADDR(p), (jlong)(count * element_size));
}

/* bridge.forward(int microBatch, int chunk, int modelChunk, boolean first, boolean last, ByteBuffer input) -> loss */
static int so_java_stage_forward(void *user, const shardopt_stage_call *call, const void *input, size_t input_count,
                                 shardopt_activation output, double *loss) {
    so_java_stage *s = (so_java_stage *)user;
    JNIEnv *env = so_java_env(s->vm);
    jobject in;
    jdouble v;
    if (!env) return 1;
    in = so_java_buffer(env, input, input_count, s->element_size);
    if (!in) {
        so_java_stage_failed(env);
        return 1;
    }
    {
        SO_STAGE_ENTER(ctx, call, output, s->opt, s->element_size);
        v = (*env)->CallDoubleMethod(env, s->bridge, s->forward, (jint)call->micro_batch, (jint)call->chunk,
                                     (jint)call->model_chunk, (jboolean)(call->first != 0), (jboolean)(call->last != 0), in);
        SO_STAGE_LEAVE();
    }
    (*env)->DeleteLocalRef(env, in);
    if (so_java_stage_failed(env)) return 1;
    *loss = v;
    return 0;
}

/* bridge.backward(int, int, int, boolean, boolean, ByteBuffer input, ByteBuffer outputGrad, ByteBuffer inputGrad) */
static int so_java_stage_backward(void *user, const shardopt_stage_call *call, const void *input, size_t input_count,
                                  const void *output_grad, size_t output_grad_count, void *input_grad) {
    so_java_stage *s = (so_java_stage *)user;
    JNIEnv *env = so_java_env(s->vm);
    jobject in, og, ig;
    if (!env) return 1;
    in = so_java_buffer(env, input, input_count, s->element_size);
    og = in ? so_java_buffer(env, output_grad, output_grad_count, s->element_size) : NULL;
    ig = og ? so_java_buffer(env, input_grad, input_count, s->element_size) : NULL;
    if (ig) {
        SO_STAGE_ENTER(ctx, call, NULL, s->opt, s->element_size);
        (*env)->CallVoidMethod(env, s->bridge, s->backward, (jint)call->micro_batch, (jint)call->chunk,
                               (jint)call->model_chunk, (jboolean)(call->first != 0), (jboolean)(call->last != 0), in,
                               og, ig);
        SO_STAGE_LEAVE();
    }
    if (in) (*env)->DeleteLocalRef(env, in);
    if (og) (*env)->DeleteLocalRef(env, og);
    if (ig) (*env)->DeleteLocalRef(env, ig);
    return so_java_stage_failed(env) || !ig;
}
#define SO_STAGE_FOREIGN_PENDING() (so_java_exc != NULL)
%}
%inline %{
/* bridge: an object with the forward/backward methods above (org.shardopt.PipelineRunner's). */
so_pipeline_s *so_pipeline_create_java(JNIEnv *JENV, shardopt_optimizer opt, jobject MODEL, size_t element_size,
                                       int micro_batches, int schedule, int virtual_stages) {
    so_java_stage *s;
    jclass cls;
    if (!MODEL) {
        so_fail(SHARDOPT_ERR_INVALID_ARGUMENT, "the pipeline stage bridge is null");
        return NULL;
    }
    s = (so_java_stage *)calloc(1, sizeof *s);
    if (!s) {
        so_fail(SHARDOPT_ERR_OUT_OF_MEMORY, "no memory for a pipeline stage");
        return NULL;
    }
    cls = (*JENV)->GetObjectClass(JENV, MODEL);
    s->forward = (*JENV)->GetMethodID(JENV, cls, "forward", "(IIIZZLjava/nio/ByteBuffer;)D");
    s->backward = s->forward ? (*JENV)->GetMethodID(JENV, cls, "backward",
                                                    "(IIIZZLjava/nio/ByteBuffer;Ljava/nio/ByteBuffer;Ljava/nio/ByteBuffer;)V")
                             : NULL;
    (*JENV)->DeleteLocalRef(JENV, cls);
    if (!s->forward || !s->backward) {
        (*JENV)->ExceptionClear(JENV);
        free(s);
        so_fail(SHARDOPT_ERR_INVALID_ARGUMENT, "the pipeline stage bridge lacks forward/backward");
        return NULL;
    }
    (*JENV)->GetJavaVM(JENV, &s->vm);
    s->bridge = (*JENV)->NewGlobalRef(JENV, MODEL);
    s->opt = opt;
    s->element_size = element_size;
    return so_pipeline_make(opt, so_java_stage_forward, so_java_stage_backward, s, so_java_stage_free, micro_batches,
                            schedule, virtual_stages);
}
/* The forward's output activation: `count` elements copied from a float[]/double[] (the layer
 * checks the array's type and length). */
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

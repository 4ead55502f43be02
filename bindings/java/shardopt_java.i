/* shardopt_java.i — the Java half of the SWIG interface: shardopt.h as it is, made Java by typemaps. A shardopt_status
 * return throws an org.shardopt.ShardoptException (INVALID_ARGUMENT: IllegalArgumentException; IO, CORRUPT: IOException;
 * UNSUPPORTED: UnsupportedOperationException; OUT_OF_MEMORY: OutOfMemoryError; else IllegalStateException) with the
 * status, rank and "SHARDOPT_ERR_X: <the library's message>"; outputs are return values (two as long[2]); memory is a
 * float[] or double[] (copied for the call) or a direct buffer, whose element type and count are read from it (so_mem),
 * and the caller's parameters of create_external also an org.shardopt.DeviceMemory (CUDA memory: so_param_buffer);
 * an options struct's setter is checked by the library's validate (a refused value is not kept).
 * Hand-written: trampolines calling the layer's bridges (train's model and lr_fn, pipeline stages, serialize_to's
 * writer), so_mem and so_view. */
%{
#define SHARDOPT_EXPERIMENTAL /* in-process members, pipelines */
#include "shardopt.h"
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

static void so_throw(JNIEnv *env, shardopt_status st) {
    static const char *const kind[] = {"InvalidState", "InvalidArgument", "InvalidState", "InvalidState", "InvalidState",
                                       "InvalidState", "Io", "Io", "OutOfMemory", "Unsupported", "InvalidState"};
    char cls[64], msg[2048];
    jclass c;
    jmethodID init;
    snprintf(cls, sizeof cls, "org/shardopt/ShardoptException$%s", kind[st >= 0 && st <= 10 ? st : 0]);
    snprintf(msg, sizeof msg, "%s: %s", shardopt_status_name(st), shardopt_last_error_message());
    if ((c = (*env)->FindClass(env, cls)) && (init = (*env)->GetMethodID(env, c, "<init>", "(Ljava/lang/String;II)V")))
        (*env)->Throw(env, (jthrowable)(*env)->NewObject(env, c, init, (*env)->NewStringUTF(env, msg), (jint)st,
                                                         (jint)shardopt_last_error_rank()));
}
/* After a Java callback: did it throw? (The bridge told the library why and keeps the exception to rethrow.) */
static int so_failed(JNIEnv *env) { int threw = (*env)->ExceptionCheck(env); (*env)->ExceptionClear(env); return threw; }
/* The JNIEnv of this thread; a library thread (async SGD's per-step rates) is attached for the call (*attached). */
static JNIEnv *so_env(JavaVM *vm, int *attached) {
    JNIEnv *e = NULL;
    *attached = (*vm)->GetEnv(vm, (void **)&e, JNI_VERSION_1_6) != JNI_OK && (*vm)->AttachCurrentThread(vm, (void **)&e, NULL) == JNI_OK;
    return e;
}
#define SO_P(p) (jlong)(uintptr_t)(p)
/* train(): the bridge's double batch(int dataset, long params, long grad (0: loss only), long samples, long count, int
 * epoch, long step, int device (-1: host memory, else device_batches' CUDA device)) and double learningRate(long t, double
 * base) (org.shardopt.ShardedOptimizer.Bridge) */
typedef struct so_cb { JavaVM *vm; jobject bridge; jmethodID batch, lr; } so_cb;
static int so_batch(void *u, const shardopt_batch *b, double *loss) {
    so_cb *c = (so_cb *)u;
    int attached, rc = 1;
    JNIEnv *env = so_env(c->vm, &attached);
    if (env) *loss = (*env)->CallDoubleMethod(env, c->bridge, c->batch, (jint)b->dataset, SO_P(b->params), SO_P(b->grad),
                                              SO_P(b->samples), (jlong)b->sample_count, (jint)b->epoch, (jlong)b->step,
                                              (jint)(b->on_device ? b->device : -1)), rc = so_failed(env);
    if (attached) (*c->vm)->DetachCurrentThread(c->vm);
    return rc;
}
static int so_lr(void *u, int64_t t, double base, double *lr) {
    so_cb *c = (so_cb *)u;
    int attached, rc = 1;
    JNIEnv *env = c ? so_env(c->vm, &attached) : NULL;
    if (!env) return 1;
    *lr = (*env)->CallDoubleMethod(env, c->bridge, c->lr, (jlong)t, base), rc = so_failed(env);
    if (attached) (*c->vm)->DetachCurrentThread(c->vm);
    return rc;
}

/* serialize_to's writer, called on the caller's thread: the bridge's void write(long address, long size)
 * (org.shardopt.ShardedOptimizer.Writer) */
typedef struct so_wr { JNIEnv *env; jobject bridge; jmethodID write; } so_wr;
static int so_write(void *u, const void *data, size_t size) {
    so_wr *w = (so_wr *)u;
    (*w->env)->CallVoidMethod(w->env, w->bridge, w->write, SO_P(data), (jlong)size);
    return so_failed(w->env);
}

/* Pipeline stages, called on the thread of run_batch: the bridge's double stage(long call, long output, long input, long
 * count, long outputGrad, long outputGradCount, long inputGrad): a forward has an output, a backward the gradients
 * (org.shardopt.PipelineRunner.Bridge). */
typedef struct so_stage { JNIEnv *env; jobject bridge; jmethodID call; } so_stage;
static __thread so_stage *so_stage_now;
#define SO_STAGE(...) (*so_stage_now->env)->CallDoubleMethod(so_stage_now->env, so_stage_now->bridge, so_stage_now->call, __VA_ARGS__)
static int so_forward(void *u, const shardopt_stage_call *c, const void *in, size_t n, shardopt_activation out, double *loss) {
    *loss = SO_STAGE(SO_P(c), SO_P(out), SO_P(in), (jlong)n, (jlong)0, (jlong)0, (jlong)0);
    return so_failed(so_stage_now->env);
}
static int so_backward(void *u, const shardopt_stage_call *c, const void *in, size_t n, const void *og, size_t ogn, void *ig) {
    SO_STAGE(SO_P(c), (jlong)0, SO_P(in), (jlong)n, SO_P(og), (jlong)ogn, SO_P(ig));
    return so_failed(so_stage_now->env);
}
static const shardopt_pipeline_stage so_stage_fns = {sizeof(shardopt_pipeline_stage), so_forward, so_backward, NULL};

/* ---- memory from Java (so_mem): a float[]/double[] (its elements for the call, copied back unless only read) or a direct
 * FloatBuffer/DoubleBuffer in native byte order (its remaining elements, in place); else an IllegalArgumentException naming
 * `what` (null: NullPointerException) ---- */
typedef struct so_mem { jarray array; void *p; size_t n; shardopt_dtype dtype; jint mode; } so_mem;
static unsigned char so_empty[8]; /* the address of 0 elements */
static int so_iae(JNIEnv *env, const char *format, ...) {
    char m[512];
    va_list a;
    va_start(a, format), vsnprintf(m, sizeof m, format, a), va_end(a);
    (*env)->ThrowNew(env, (*env)->FindClass(env, "java/lang/IllegalArgumentException"), m);
    return 0;
}
static int so_mem_get(JNIEnv *env, jobject o, const char *what, int out, so_mem *m) {
    static const char *const kind[] = {"[F", "[D", "java/nio/FloatBuffer", "java/nio/DoubleBuffer"};
    static const uint16_t one = 1;
    const char *native = *(const unsigned char *)&one ? "LITTLE_ENDIAN" : "BIG_ENDIAN";
    jclass order, buffer;
    int k = 0;
    memset(m, 0, sizeof *m);
    if (!o) return (*env)->ThrowNew(env, (*env)->FindClass(env, "java/lang/NullPointerException"), what), 0;
    while (k < 4 && !(*env)->IsInstanceOf(env, o, (*env)->FindClass(env, kind[k]))) ++k;
    if (k == 4) return so_iae(env, "%s must be a float[], double[], or a direct FloatBuffer or DoubleBuffer", what);
    m->dtype = k % 2 ? SHARDOPT_F64 : SHARDOPT_F32;
    if (k < 2) {
        if (!(m->n = (size_t)(*env)->GetArrayLength(env, o))) return m->p = so_empty, 1;
        m->array = (jarray)o, m->mode = out ? 0 : JNI_ABORT;
        m->p = k ? (void *)(*env)->GetDoubleArrayElements(env, o, NULL) : (void *)(*env)->GetFloatArrayElements(env, o, NULL);
        return m->p != NULL;
    }
    if (!(m->p = (*env)->GetDirectBufferAddress(env, o)))
        return so_iae(env, "%s must be a direct buffer (ByteBuffer.allocateDirect)", what);
    order = (*env)->FindClass(env, "java/nio/ByteOrder"), buffer = (*env)->FindClass(env, "java/nio/Buffer");
    if (!(*env)->IsSameObject(env, (*env)->CallObjectMethod(env, o, (*env)->GetMethodID(env, (*env)->FindClass(env, kind[k]), "order",
                                                                                         "()Ljava/nio/ByteOrder;")),
                              (*env)->GetStaticObjectField(env, order, (*env)->GetStaticFieldID(env, order, native, "Ljava/nio/ByteOrder;"))))
        return so_iae(env, "%s is in %s byte order; native code reads %s (make it with ByteBuffer.allocateDirect(n).order("
                      "ByteOrder.nativeOrder()))", what, native[0] == 'L' ? "BIG_ENDIAN" : "LITTLE_ENDIAN", native);
    m->p = (char *)m->p + (*env)->CallIntMethod(env, o, (*env)->GetMethodID(env, buffer, "position", "()I")) * (k % 2 ? 8 : 4);
    m->n = (size_t)(*env)->CallIntMethod(env, o, (*env)->GetMethodID(env, buffer, "remaining", "()I"));
    return 1;
}
static void so_mem_release(JNIEnv *env, so_mem *m) {
    if (m->array && m->dtype == SHARDOPT_F64) (*env)->ReleaseDoubleArrayElements(env, m->array, m->p, m->mode);
    else if (m->array) (*env)->ReleaseFloatArrayElements(env, m->array, m->p, m->mode);
}
/* m, taken, checked by the library (a shardopt_*_check_array status): else released, and the error thrown */
static int so_mem_checked(JNIEnv *env, so_mem *m, shardopt_status st) {
    if (st != SHARDOPT_OK) so_mem_release(env, m), so_throw(env, st);
    return st == SHARDOPT_OK;
}
/* The caller's parameter buffer of create_external: an org.shardopt.DeviceMemory (its device address, count and element
 * type: device memory, which the library checks), else a direct buffer (so_mem); its element type checked by the library
 * against the layout params, its count by create_external. */
static int so_param_buffer(JNIEnv *env, jobject o, shardopt_params params, so_mem *m) {
    jclass device = (*env)->FindClass(env, "org/shardopt/DeviceMemory");
    if (!device) return 0; /* NoClassDefFoundError thrown */
    if (o && (*env)->IsInstanceOf(env, o, device)) {
        memset(m, 0, sizeof *m); /* no array: nothing to release */
        m->p = (void *)(uintptr_t)(*env)->GetLongField(env, o, (*env)->GetFieldID(env, device, "address", "J"));
        m->n = (size_t)(*env)->GetLongField(env, o, (*env)->GetFieldID(env, device, "count", "J"));
        m->dtype = (shardopt_dtype)(*env)->GetIntField(env, o, (*env)->GetFieldID(env, device, "dtype", "I"));
    } else if (!so_mem_get(env, o, "parameters", 1, m)) return 0;
    return so_mem_checked(env, m, shardopt_params_check_array(params, "parameters", m->dtype, m->n, m->n));
}
/* allgather (gather 1) and reduce_scatter (0): data in m, and the result, a new array of data's type, in r */
static jarray so_gather_scatter(JNIEnv *env, shardopt_comm comm, jobject data, int gather, so_mem *m, so_mem *r) {
    int ws = 1;
    size_t n;
    jarray out;
    if (!so_mem_get(env, data, "data", 0, m)) return NULL;
    shardopt_comm_size(comm, &ws); /* a bad handle fails the call itself */
    n = gather ? m->n * (size_t)ws : m->n / (size_t)ws;
    if (!gather && m->n % (size_t)ws)
        so_iae(env, "reduceScatter: data has %zu elements, not a multiple of the world size %d", m->n, ws), out = NULL;
    else out = m->dtype == SHARDOPT_F64 ? (jarray)(*env)->NewDoubleArray(env, (jsize)n) : (jarray)(*env)->NewFloatArray(env, (jsize)n);
    if (out && so_mem_get(env, out, "the result", 1, r)) return out;
    so_mem_release(env, m); /* failed: nothing else will */
    return NULL;
}

#define SO_SETTER(wrapper) (sizeof(wrapper) > 5 && !memcmp((wrapper) + sizeof(wrapper) - 5, "_set", 4)) /* folded */

/* UCX's error handling (loaded with libshardopt) replaces the handlers the JVM turns into NullPointerException and
 * friends: put the JVM's back (its SIGPIPE handler, which UCX leaves alone, is the same one). */
JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM *vm, void *reserved) {
    struct sigaction jvm;
    if (sigaction(SIGPIPE, NULL, &jvm) == 0 && (jvm.sa_flags & SA_SIGINFO) && jvm.sa_sigaction != NULL)
        sigaction(SIGSEGV, &jvm, NULL), sigaction(SIGBUS, &jvm, NULL), sigaction(SIGILL, &jvm, NULL), sigaction(SIGFPE, &jvm, NULL);
    return JNI_VERSION_1_6;
}
%}
%pragma(java) jniclassclassmodifiers="public final class" /* the layer loads the library (NativeLoader) */
%include "enumtypeunsafe.swg"
%javaconst(1);
%apply long long { int64_t, uint64_t };
%apply int { int32_t };
%apply unsigned long { size_t };

/* ---- statuses: void, or the output the function returns ---- */
%define SO_RET(NAME, JNI, JTYPE, JSTYPE)
%typemap(jni) shardopt_status NAME "JNI"
%typemap(jtype) shardopt_status NAME "JTYPE"
%typemap(jstype) shardopt_status NAME "JSTYPE"
%typemap(out) shardopt_status NAME %{ if ($1 != SHARDOPT_OK) so_throw(jenv, $1); %}
%typemap(javaout) shardopt_status NAME { return $jnicall; }
%enddef
%define SO_HANDLE(NAME, CLASS)
SO_RET(NAME, jlong, long, CLASS)
%typemap(javaout) shardopt_status NAME { long p = $jnicall; return p == 0 ? null : new CLASS(p, false); }
%enddef
SO_RET(, void, void, void)
%typemap(javaout) shardopt_status { $jnicall; }
SO_RET(SO_INT, jint, int, int)
SO_RET(SO_LONG, jlong, long, long)
SO_RET(SO_DOUBLE, jdouble, double, double)
SO_RET(SO_LONGS, jlongArray, long[], long[])
SO_RET(SO_BYTES, jbyteArray, byte[], byte[])
SO_RET(SO_ARRAY, jobject, Object, Object)
SO_HANDLE(SO_COMM, SWIGTYPE_p_shardopt_comm_s)
SO_HANDLE(SO_PARAMS, SWIGTYPE_p_shardopt_params_s)
SO_HANDLE(SO_OPT, SWIGTYPE_p_shardopt_optimizer_s)
SO_HANDLE(SO_PLAN, SWIGTYPE_p_shardopt_plan_s)
%apply shardopt_status SO_INT { shardopt_status shardopt_comm_rank, shardopt_status shardopt_comm_size, shardopt_status shardopt_comm_device, shardopt_status shardopt_params_add,
    shardopt_status shardopt_params_add_matrix, shardopt_status shardopt_optimizer_tensor_count,
    shardopt_status shardopt_optimizer_bucket_count, shardopt_status shardopt_optimizer_should_early_stop };
%apply shardopt_status SO_LONG { shardopt_status shardopt_params_element_count, shardopt_status shardopt_params_padded_count_for,
    shardopt_status shardopt_optimizer_bucket_info, shardopt_status shardopt_optimizer_step_count, shardopt_status shardopt_optimizer_bytes_sent,
    shardopt_status shardopt_optimizer_parameters, shardopt_status shardopt_optimizer_tensor_parameters, shardopt_status shardopt_optimizer_gather,
    shardopt_status shardopt_pipeline_create, shardopt_status shardopt_activation_resize };
%apply shardopt_status SO_DOUBLE { shardopt_status shardopt_optimizer_learning_rate };
%apply shardopt_status SO_LONGS { shardopt_status shardopt_optimizer_tensor_info, shardopt_status shardopt_optimizer_element_count,
    shardopt_status shardopt_optimizer_bucket_grad, shardopt_status shardopt_optimizer_tensor_grad, shardopt_status shardopt_stage_call_grad,
    shardopt_status shardopt_plan_count };
%apply shardopt_status SO_BYTES { shardopt_status shardopt_optimizer_serialize };
%apply shardopt_status SO_ARRAY { shardopt_status shardopt_allgather, shardopt_status shardopt_reduce_scatter, shardopt_status shardopt_scatter };
%apply shardopt_status SO_COMM { shardopt_status shardopt_comm_create_inprocess_member, shardopt_status shardopt_comm_create_from_env, shardopt_status shardopt_comm_create,
    shardopt_status shardopt_comm_create_single };
%apply shardopt_status SO_PARAMS { shardopt_status shardopt_params_create };
%apply shardopt_status SO_OPT { shardopt_status shardopt_optimizer_create, shardopt_status shardopt_optimizer_create_external };
%apply shardopt_status SO_PLAN { shardopt_status shardopt_plan_create };

/* a CUDA stream (the sharding options' cuda_stream): its address as a long, 0 for NULL */
%typemap(jni) void *cuda_stream "jlong"
%typemap(jtype) void *cuda_stream "long"
%typemap(jstype) void *cuda_stream "long"
%typemap(javain) void *cuda_stream "$javainput"
%typemap(javaout) void *cuda_stream { return $jnicall; }
%typemap(in) void *cuda_stream %{ $1 = (void *)(uintptr_t)$input; %}
%typemap(out) void *cuda_stream %{ $result = (jlong)(uintptr_t)$1; %}
%apply void *cuda_stream { void *consumer_stream }; /* shardopt_optimizer_order_stream's */

/* ---- outputs (library memory as its address: so_view makes a ByteBuffer of it) ---- */
%typemap(in, numinputs=0) SWIGTYPE *SO_OUT ($*1_ltype v = 0) "$1 = &v;"
%typemap(argout) SWIGTYPE *SO_OUT "memcpy(&$result, &v$argnum, sizeof v$argnum);"
%apply SWIGTYPE *SO_OUT { int *device, int *rank, int *size, int *index, int *count, int *stop, size_t *count, int64_t *steps, uint64_t *bytes,
    double *lr, shardopt_comm *comm, shardopt_comm *out, shardopt_params *out, shardopt_optimizer *out, shardopt_pipeline *out, shardopt_plan *out,
    void **params, void **data }
%typemap(in, numinputs=0) (SWIGTYPE *SO_A, SWIGTYPE *SO_B) ($*1_ltype a = 0, $*2_ltype b = 0) "$1 = &a; $2 = &b;"
%typemap(argout) (SWIGTYPE *SO_A, SWIGTYPE *SO_B) %{ { jlong v[2] = {(jlong)(uintptr_t)a$argnum, (jlong)b$argnum};
    if (($result = (*jenv)->NewLongArray(jenv, 2))) (*jenv)->SetLongArrayRegion(jenv, $result, 0, 2, v); } %}
%apply (SWIGTYPE *SO_A, SWIGTYPE *SO_B) { (size_t *count, int *bucket), (size_t *count, size_t *padded_count), (void **grad, size_t *count),
    (int32_t *count, int32_t *fitting) }
%typemap(in, numinputs=0) (void **data, size_t *size) (void *d = NULL, size_t n = 0) "$1 = &d; $2 = &n;"
%typemap(argout) (void **data, size_t *size) %{
    if (n$argnum > INT32_MAX - 8) (*jenv)->ThrowNew(jenv, (*jenv)->FindClass(jenv, "java/lang/OutOfMemoryError"), "the checkpoint does not fit a Java array");
    else if (d$argnum && ($result = (*jenv)->NewByteArray(jenv, (jsize)n$argnum)))
        (*jenv)->SetByteArrayRegion(jenv, $result, 0, (jsize)n$argnum, (const jbyte *)d$argnum);
    shardopt_buffer_free(d$argnum); %}
%typemap(check) shardopt_step_result *result, shardopt_memory_stats *stats, shardopt_elastic_status *status,
    shardopt_training_result *result, shardopt_pipeline_result *result, const shardopt_pipeline_options *options,
    shardopt_plan_entry *entry, const shardopt_plan_request *request, const shardopt_plan_cluster *cluster,
    shardopt_checkpoint_info *info
    "if ($1) *(size_t *)$1 = sizeof *$1; /* struct_size, every struct's first field */"
%typemap(in, numinputs=0) size_t struct_size "$1 = sizeof *arg1;"
%immutable struct_size;

/* ---- memory from Java: an Object (so_mem) as pointer, count and element type; direct buffers (no copy) for what
 * outlives the call (the training result's, the caller's parameters) ---- */
%define SO_MEM(ARGS, LOCALS, SET, RELEASE)
%typemap(jni) ARGS "jobject"
%typemap(jtype) ARGS "Object"
%typemap(jstype) ARGS "Object"
%typemap(javain) ARGS "$javainput"
%typemap(in) ARGS LOCALS %{ SET %}
%typemap(freearg) ARGS RELEASE
%enddef
%define SO_MEM1(ARGS, WHAT, OUT, SET)
SO_MEM(ARGS, (so_mem m), if (!so_mem_get(jenv, $input, WHAT, OUT, &m)) return $null; SET, "so_mem_release(jenv, &m$argnum);")
%enddef
SO_MEM1((const void *send, void *recv, size_t count, shardopt_dtype dtype), "data", 1, $1 = $2 = m.p; $3 = m.n; $4 = m.dtype;)
SO_MEM1((void *buffer, size_t count, shardopt_dtype dtype), "data", 1, $1 = m.p; $2 = m.n; $3 = m.dtype;)
SO_MEM1((const void *buffer, size_t count, shardopt_dtype dtype), "data", 0, $1 = m.p; $2 = m.n; $3 = m.dtype;)
/* the packed parameters and the caller's parameter buffer (direct: it outlives the call), checked by the library */
%define SO_PACKED(ARGS, WHAT, OUT, CHECK)
SO_MEM1(ARGS, WHAT, OUT, if (!so_mem_checked(jenv, &m, CHECK)) return $null; $1 = m.p; $2 = m.n;)
%enddef
SO_PACKED((void *packed, size_t count), "out", 1, shardopt_optimizer_check_array(arg1, "out", m.dtype, m.n))
SO_PACKED((const void *packed, size_t count), "values", 0, shardopt_optimizer_check_array(arg1, "values", m.dtype, m.n))
SO_MEM((void *param_buffer, size_t param_count), (so_mem m), if (!so_param_buffer(jenv, $input, arg2, &m)) return $null;
       $1 = m.p; $2 = m.n;, "so_mem_release(jenv, &m$argnum);") /* a direct buffer or a DeviceMemory (so_param_buffer) */
SO_MEM(const void *initial, (so_mem m, jobject o), o = $input; m.array = NULL;, "so_mem_release(jenv, &m$argnum);")
%typemap(check) const void *initial %{ /* after the other arguments, which then have nothing to release when it fails */
    if (o$argnum && !(so_mem_get(jenv, o$argnum, "initial", 0, &m$argnum)
                      && so_mem_checked(jenv, &m$argnum,
                                        shardopt_params_check_array(arg2, "initial", m$argnum.dtype, m$argnum.n, 0))))
        return $null;
    $1 = o$argnum ? m$argnum.p : NULL; %}
%define SO_GATHER_SCATTER(COUNT, GATHER) /* the result, a new array, is returned */
SO_MEM((const void *send, void *recv, size_t COUNT, shardopt_dtype dtype), (so_mem m, so_mem r, jarray out = NULL),
       if (!(out = so_gather_scatter(jenv, arg1, $input, GATHER, &m, &r))) return $null;
       $1 = m.p; $2 = r.p; $3 = GATHER ? m.n : r.n; $4 = m.dtype;, "so_mem_release(jenv, &m$argnum); so_mem_release(jenv, &r$argnum);")
%typemap(argout) (const void *send, void *recv, size_t COUNT, shardopt_dtype dtype) "$result = out$argnum;"
%enddef
SO_GATHER_SCATTER(send_count, 1)
SO_GATHER_SCATTER(recv_count, 0)
%typemap(in, numinputs=0) (void **recv, size_t *recv_count) (void *d = NULL, size_t n = 0) "$1 = &d; $2 = &n;"
%typemap(argout) (void **recv, size_t *recv_count) %{ /* scatter: this rank's part, an array of the buffer's type */
    if (d$argnum && arg4 == SHARDOPT_F64 && ($result = (*jenv)->NewDoubleArray(jenv, (jsize)n$argnum)))
        (*jenv)->SetDoubleArrayRegion(jenv, $result, 0, (jsize)n$argnum, (const jdouble *)d$argnum);
    else if (d$argnum && ($result = (*jenv)->NewFloatArray(jenv, (jsize)n$argnum)))
        (*jenv)->SetFloatArrayRegion(jenv, $result, 0, (jsize)n$argnum, (const jfloat *)d$argnum);
    shardopt_buffer_free(d$argnum); %}
%typemap(jni) void *DIRECT, shardopt_pipeline pipeline, (shardopt_batch_fn model, void *user_data) "jobject"
%typemap(jtype) void *DIRECT "java.nio.Buffer"
%typemap(jstype) void *DIRECT "java.nio.Buffer"
%typemap(jtype) shardopt_pipeline pipeline, (shardopt_batch_fn model, void *user_data) "Object"
%typemap(jstype) shardopt_pipeline pipeline, (shardopt_batch_fn model, void *user_data) "Object"
%typemap(javain) void *DIRECT, shardopt_pipeline pipeline, (shardopt_batch_fn model, void *user_data) "$javainput"
%typemap(in) void *DIRECT "$1 = ($1_ltype)($input ? (*jenv)->GetDirectBufferAddress(jenv, $input) : NULL);"
%typemap(out) void *DIRECT "(void)$1; $result = NULL;"
%typemap(javaout) void *DIRECT { return null; }
%apply void *DIRECT { const void *data, void *best_parameters, double *training_loss_history,
    double *validation_loss_history, double *learning_rate_history }

/* ---- train(): the Java bridge as the model, and as the lr_fn of a CUSTOM schedule (train's options are arg 4) ---- */
%typemap(in) (shardopt_batch_fn model, void *user_data) (so_cb cb = {0}) %{ {
    jclass k = (*jenv)->GetObjectClass(jenv, $input);
    (*jenv)->GetJavaVM(jenv, &cb.vm);
    cb.batch = (*jenv)->GetMethodID(jenv, k, "batch", "(IJJJJIJI)D");
    if (!cb.batch || !(cb.lr = (*jenv)->GetMethodID(jenv, k, "learningRate", "(JD)D"))) return $null;
    cb.bridge = (*jenv)->NewGlobalRef(jenv, $input);
    $1 = so_batch;
    $2 = &cb; } %}
%typemap(freearg) (shardopt_batch_fn model, void *user_data) "if (cb$argnum.bridge) (*jenv)->DeleteGlobalRef(jenv, cb$argnum.bridge);"
%typemap(in) const shardopt_training_options *options (shardopt_training_options o) %{
    if (($1 = *(shardopt_training_options **)&$input)) { o = *$1; o.lr_user_data = &cb2; $1 = &o; } %}
%typemap(argout) shardopt_training_options *opts "if ($1) $1->lr_fn = so_lr; /* init: a CUSTOM schedule calls the bridge */"
%ignore shardopt_training_options::lr_fn;
%ignore shardopt_training_options::lr_user_data;

/* ---- serialize_to: the Java bridge as the writer; null: this rank wants no bytes (NULL) ---- */
%typemap(jni) (shardopt_write_fn write, void *user_data) "jobject"
%typemap(jtype) (shardopt_write_fn write, void *user_data) "Object"
%typemap(jstype) (shardopt_write_fn write, void *user_data) "Object"
%typemap(javain) (shardopt_write_fn write, void *user_data) "$javainput"
%typemap(in) (shardopt_write_fn write, void *user_data) (so_wr w) %{
    w.env = jenv, w.bridge = $input;
    if ($input && !(w.write = (*jenv)->GetMethodID(jenv, (*jenv)->GetObjectClass(jenv, $input), "write", "(JJ)V"))) return $null;
    $1 = $input ? so_write : NULL, $2 = &w; %}

/* ---- pipelines: the stage is the bridge given to run_batch and destroy (its long field `pipe` is the handle) ---- */
%typemap(in, numinputs=0) const shardopt_pipeline_stage *stage "$1 = ($1_ltype)&so_stage_fns;"
%typemap(in) shardopt_pipeline pipeline (so_stage st, so_stage *outer = NULL) %{ {
    jclass k = (*jenv)->GetObjectClass(jenv, $input);
    st.env = jenv;
    st.bridge = $input;
    if (!(st.call = (*jenv)->GetMethodID(jenv, k, "stage", "(JJJJJJJ)D"))) return $null;
    $1 = (shardopt_pipeline)(uintptr_t)(*jenv)->GetLongField(jenv, $input, (*jenv)->GetFieldID(jenv, k, "pipe", "J"));
    outer = so_stage_now;
    so_stage_now = &st; } %}
%typemap(freearg) shardopt_pipeline pipeline "so_stage_now = outer$argnum;"

/* ---- option structs: copyable; each setter validated by the library ---- */
%define SO_OPTIONS(S, VALIDATE)
%extend S { S() { return (S *)calloc(1, sizeof(S)); } S(const S *from) { S *c = (S *)malloc(sizeof(S)); if (c) *c = *from; return c; } }
%typemap(in) struct S *self (S saved) %{ $1 = *(S **)&$input; if ($1) saved = *$1; %}
%typemap(argout) struct S *self %{ if ($1 && SO_SETTER("$symname")) { shardopt_status st_ = VALIDATE($1);
    if (st_ != SHARDOPT_OK) { *$1 = saved$argnum; so_throw(jenv, st_); } } %}
%enddef
SO_OPTIONS(shardopt_optimizer_options, shardopt_optimizer_options_validate)
SO_OPTIONS(shardopt_sharding_options, shardopt_sharding_options_validate_strict) /* also refuses 0 for a default */
SO_OPTIONS(shardopt_elastic_options, shardopt_elastic_options_validate_strict)
SO_OPTIONS(shardopt_training_options, shardopt_training_options_validate)

/* ---- the C ABI, less what Java does not use ---- */
%rename("$ignore", %$isfunction, regextarget=1) "_async$|^shardopt_work_|_init_sized$|_optimize$|_optimize_options_init$|^shardopt_optimizer_options_(init|defaults)$|^shardopt_(comm_create_inprocess|comm_split|comm_set_cuda_stream|status_name|buffer_free|optimizer_device|params_tensor_count|params_padded_count|training_learning_rate|.*_check_array)$";
%ignore shardopt_batch;
%ignore shardopt_status; /* its values: ShardoptException.getStatus() */
%ignore shardopt_pipeline_stage;
%ignore shardopt_optimize_options;
%ignore shardopt_optimize_result;
#define SHARDOPT_API
#define SHARDOPT_EXPERIMENTAL
%include "shardopt.h"

%typemap(jtype) jobject "java.nio.ByteBuffer"
%typemap(jstype) jobject "java.nio.ByteBuffer"
%typemap(out) jobject "$result = $1;"
%typemap(javaout) jobject { return $jnicall; }
%typemap(in, numinputs=0) JNIEnv *jenv "$1 = jenv;"
%inline %{
static unsigned char so_none[8]; /* an address for 0 elements */
jobject so_view(JNIEnv *jenv, int64_t address, int64_t bytes) {
    return (*jenv)->NewDirectByteBuffer(jenv, address ? (void *)(uintptr_t)address : (void *)so_none, bytes);
}
%}

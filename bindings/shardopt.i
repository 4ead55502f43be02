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
%module shardopt_native

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
#if defined(SWIGPYTHON)
%{
static __thread PyObject *so_py_et, *so_py_ev, *so_py_tb;

static void so_py_raise(void) {
    PyObject *type;
    if (so_err_status == SO_ERR_FOREIGN && so_py_et) {
        PyErr_Restore(so_py_et, so_py_ev, so_py_tb);
        so_py_et = so_py_ev = so_py_tb = NULL;
        return;
    }
    switch (so_err_status) {
    case SHARDOPT_ERR_INVALID_ARGUMENT: type = PyExc_ValueError; break;
    case SHARDOPT_ERR_IO: case SHARDOPT_ERR_CORRUPT: type = PyExc_OSError; break;
    case SHARDOPT_ERR_UNSUPPORTED: type = PyExc_NotImplementedError; break;
    case SHARDOPT_ERR_OUT_OF_MEMORY: type = PyExc_MemoryError; break;
    default: type = PyExc_RuntimeError; break;
    }
    PyErr_SetString(type, so_err_msg);
}

typedef struct so_py_model {
    PyObject *fn;
    size_t param_bytes;
} so_py_model;

/* Tells the library why the callback failed (shardopt_model_error), so optimize's error on every
 * rank names this rank and "<ExceptionType>: <message>"; the exception itself is kept (not
 * cleared) so this rank re-raises it. */
static void so_py_report_model_error(PyObject *et, PyObject *ev) {
    char buf[1024];
    const char *tname = "exception";
    const char *msg = NULL;
    PyObject *str = NULL, *bytes = NULL;
    if (et && PyType_Check(et)) tname = ((PyTypeObject *)et)->tp_name;
    if (ev) str = PyObject_Str(ev);
    if (str) bytes = PyUnicode_AsEncodedString(str, "utf-8", "replace");
    if (bytes) msg = PyBytes_AsString(bytes);
    if (msg && *msg) snprintf(buf, sizeof buf, "%s: %s", tname, msg);
    else snprintf(buf, sizeof buf, "%s", tname);
    PyErr_Clear(); /* from str()/encode failing, if they did */
    shardopt_model_error(buf);
    Py_XDECREF(bytes);
    Py_XDECREF(str);
}

/* shardopt_model_fn calling fn(params_address: int, grad_address: int, samples: bytes) -> float.
 * The layer builds guarded numpy views over the two addresses (invalid once the call returns);
 * the sample indices are copied, since their buffer lives only as long as optimize(). */
static int so_py_model_call(void *user_data, const void *params, void *grad, const int64_t *samples,
                            size_t n, double *loss) {
    so_py_model *m = (so_py_model *)user_data;
    PyGILState_STATE gil = PyGILState_Ensure();
    int rc = 1;
    PyObject *p = PyLong_FromVoidPtr((void *)params);
    PyObject *g = PyLong_FromVoidPtr(grad);
    PyObject *s = PyBytes_FromStringAndSize((const char *)samples, (Py_ssize_t)(n * sizeof(int64_t)));
    PyObject *r = (p && g && s) ? PyObject_CallFunctionObjArgs(m->fn, p, g, s, NULL) : NULL;
    if (r) {
        double v = PyFloat_AsDouble(r);
        if (!(v == -1.0 && PyErr_Occurred())) {
            *loss = v;
            rc = 0;
        }
        Py_DECREF(r);
    }
    if (rc != 0 && PyErr_Occurred()) {
        if (!so_py_et) {
            PyErr_Fetch(&so_py_et, &so_py_ev, &so_py_tb);
            PyErr_NormalizeException(&so_py_et, &so_py_ev, &so_py_tb);
            so_py_report_model_error(so_py_et, so_py_ev);
        } else {
            PyErr_Clear();
        }
    } else if (rc != 0) {
        shardopt_model_error("the model returned no loss");
    }
    Py_XDECREF(p);
    Py_XDECREF(g);
    Py_XDECREF(s);
    PyGILState_Release(gil);
    return rc;
}
%}

%exception {
    so_err_status = 0;
    $action
    if (so_err_status) {
        so_py_raise();
        SWIG_fail;
    }
}

/* Caller memory through the buffer protocol (numpy arrays, array.array, bytearray); None = NULL. */
%typemap(in) void *WBUF (Py_buffer view = {0}) {
    if ($input == Py_None) {
        $1 = NULL;
    } else {
        if (PyObject_GetBuffer($input, &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) != 0) SWIG_fail;
        $1 = view.buf;
    }
}
%typemap(freearg) void *WBUF { PyBuffer_Release(&view$argnum); }
%typemap(in) const void *RBUF (Py_buffer view = {0}) {
    if ($input == Py_None) {
        $1 = NULL;
    } else {
        if (PyObject_GetBuffer($input, &view, PyBUF_C_CONTIGUOUS) != 0) SWIG_fail;
        $1 = view.buf;
    }
}
%typemap(freearg) const void *RBUF { PyBuffer_Release(&view$argnum); }
%typemap(in) PyObject *CALLABLE {
    if (!PyCallable_Check($input)) {
        PyErr_SetString(PyExc_TypeError, "model must be callable");
        SWIG_fail;
    }
    $1 = $input;
}
/* (address, bytes): the layer wraps it in a guarded numpy view that keeps the optimizer alive
 * and raises once the optimizer is closed (a bare memoryview would dangle). */
%typemap(out) so_bytes {
    if ($1.ptr) {
        $result = Py_BuildValue("(NN)", PyLong_FromVoidPtr($1.ptr), PyLong_FromSize_t($1.bytes));
    } else {
        Py_INCREF(Py_None);
        $result = Py_None;
    }
}

#elif defined(SWIGJAVA)
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

#elif defined(SWIGCSHARP)
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
#endif

/* ------------------------------------------------------------------------------------------------
 * The option and result structs of shardopt.h (fields as in C), and its enums; no raw functions.
 * ---------------------------------------------------------------------------------------------- */
/* C enums as plain int constants everywhere (the layers define their own enums) */
#if defined(SWIGJAVA)
%include "enumtypeunsafe.swg"
%javaconst(1);
#elif defined(SWIGCSHARP)
%include "enumsimple.swg"
%csconst(1);
#endif
%apply long long { int64_t };
%apply int { int32_t };
#if defined(SWIGCSHARP)
%apply unsigned long long { size_t, uint64_t }; /* C# `ulong`: 64 bits, as size_t is here */
#else
%apply unsigned long { size_t };   /* Java long, Python int */
%apply long long { uint64_t };     /* Java long rather than BigInteger */
#endif
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

#if defined(SWIGPYTHON)
%inline %{
/* model(params, grad, samples) -> loss, with memoryviews over the library's buffers */
void so_optimize_py(shardopt_optimizer opt, PyObject *CALLABLE, size_t element_size,
                    const shardopt_optimize_options *options, shardopt_optimize_result *result,
                    void *best, size_t best_count, void *history, size_t history_capacity) {
    so_py_model m;
    size_t n = 0;
    shardopt_status st;
    SO_TRY(shardopt_optimizer_element_count(opt, &n, NULL), SO_VOID);
    m.fn = CALLABLE;
    m.param_bytes = n * element_size;
    st = so_optimize_common(opt, so_py_model_call, &m, options, result, best, best_count, history, history_capacity);
#define so_foreign_pending (so_py_et != NULL)
    SO_OPTIMIZE_FINISH(st);
#undef so_foreign_pending
}
%}
/* Python-only helpers (the other languages have their own blocks). Buffer sizes are checked here
 * against the element counts, so a short array is an error instead of an out-of-bounds access. */
%{
static size_t so_py_dtype_size(int dtype) {
    switch (dtype) {
    case SHARDOPT_F32: case SHARDOPT_I32: return 4;
    case SHARDOPT_F64: case SHARDOPT_I64: return 8;
    case SHARDOPT_U8: return 1;
    default: return 2; /* the 16-bit kinds */
    }
}
static int so_py_check(const char *what, size_t have_bytes, size_t count, int dtype) {
    size_t need = count * so_py_dtype_size(dtype);
    if (have_bytes < need) {
        so_fail(SHARDOPT_ERR_INVALID_ARGUMENT, "%s holds %zu bytes, %zu elements need %zu", what, have_bytes,
                count, need);
        return 0;
    }
    return 1;
}
%}
%typemap(in) (void *WBUF, size_t WBYTES) (Py_buffer view = {0}) {
    if ($input == Py_None) {
        $1 = NULL; $2 = 0;
    } else {
        if (PyObject_GetBuffer($input, &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) != 0) SWIG_fail;
        $1 = view.buf; $2 = (size_t)view.len;
    }
}
%typemap(freearg) (void *WBUF, size_t WBYTES) { PyBuffer_Release(&view$argnum); }
%typemap(in) (const void *RBUF, size_t RBYTES) (Py_buffer view = {0}) {
    if ($input == Py_None) {
        $1 = NULL; $2 = 0;
    } else {
        if (PyObject_GetBuffer($input, &view, PyBUF_C_CONTIGUOUS) != 0) SWIG_fail;
        $1 = view.buf; $2 = (size_t)view.len;
    }
}
%typemap(freearg) (const void *RBUF, size_t RBYTES) { PyBuffer_Release(&view$argnum); }
%inline %{
double so_py_learning_rate(shardopt_optimizer opt) {
    double lr = 0.0;
    SO_TRY(shardopt_optimizer_learning_rate(opt, &lr), 0.0);
    return lr;
}
void so_py_allreduce(shardopt_comm comm, void *WBUF, size_t WBYTES, size_t count, int dtype, int op) {
    if (!so_py_check("data", WBYTES, count, dtype)) return;
    SO_TRY(shardopt_allreduce(comm, WBUF, WBUF, count, (shardopt_dtype)dtype, (shardopt_reduce_op)op), SO_VOID);
}
void so_py_broadcast(shardopt_comm comm, void *WBUF, size_t WBYTES, size_t count, int dtype, int root) {
    if (!so_py_check("data", WBYTES, count, dtype)) return;
    SO_TRY(shardopt_broadcast(comm, WBUF, count, (shardopt_dtype)dtype, root), SO_VOID);
}
void so_py_allgather(shardopt_comm comm, const void *RBUF, size_t RBYTES, void *WBUF, size_t WBYTES,
                     size_t send_count, int dtype) {
    int size = 0;
    SO_TRY(shardopt_comm_size(comm, &size), SO_VOID);
    if (!so_py_check("send", RBYTES, send_count, dtype) ||
        !so_py_check("recv", WBYTES, send_count * (size_t)size, dtype)) return;
    SO_TRY(shardopt_allgather(comm, RBUF, WBUF, send_count, (shardopt_dtype)dtype), SO_VOID);
}
void so_py_reduce_scatter(shardopt_comm comm, const void *RBUF, size_t RBYTES, void *WBUF, size_t WBYTES,
                          size_t recv_count, int dtype, int op) {
    int size = 0;
    SO_TRY(shardopt_comm_size(comm, &size), SO_VOID);
    if (!so_py_check("send", RBYTES, recv_count * (size_t)size, dtype) ||
        !so_py_check("recv", WBYTES, recv_count, dtype)) return;
    SO_TRY(shardopt_reduce_scatter(comm, RBUF, WBUF, recv_count, (shardopt_dtype)dtype, (shardopt_reduce_op)op), SO_VOID);
}
void so_py_send(shardopt_comm comm, const void *RBUF, size_t RBYTES, size_t count, int dtype, int peer, int tag) {
    if (!so_py_check("data", RBYTES, count, dtype)) return;
    SO_TRY(shardopt_send(comm, RBUF, count, (shardopt_dtype)dtype, peer, tag), SO_VOID);
}
void so_py_recv(shardopt_comm comm, void *WBUF, size_t WBYTES, size_t count, int dtype, int peer, int tag) {
    if (!so_py_check("data", WBYTES, count, dtype)) return;
    SO_TRY(shardopt_recv(comm, WBUF, count, (shardopt_dtype)dtype, peer, tag), SO_VOID);
}
void so_py_get_parameters(shardopt_optimizer opt, void *WBUF, size_t WBYTES, size_t count, int dtype) {
    if (!so_py_check("out", WBYTES, count, dtype)) return;
    SO_TRY(shardopt_optimizer_get_parameters(opt, WBUF, count), SO_VOID);
}
void so_py_set_parameters(shardopt_optimizer opt, const void *RBUF, size_t RBYTES, size_t count, int dtype) {
    if (!so_py_check("values", RBYTES, count, dtype)) return;
    SO_TRY(shardopt_optimizer_set_parameters(opt, RBUF, count), SO_VOID);
}
%}
#elif defined(SWIGJAVA)
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
#elif defined(SWIGCSHARP)
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
#endif

/* Pipeline parallelism: stage callbacks and the runner (pipeline.i). */
%include "pipeline.i"

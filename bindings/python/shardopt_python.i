/* shardopt_python.i — the Python half of the SWIG interface (bindings/shardopt.i includes it): the C ABI of
 * capi/include/shardopt.h as it is, its pointers turned into Python by typemaps. A failing shardopt_status raises the
 * ShardoptError subclass of its status (also ValueError, RuntimeError, OSError... as Python expects), "SHARDOPT_ERR_X:
 * <library message>" with .status, .status_name, .rank; or, when a Python callback failed the call, its exception.
 * Outputs through pointers are returned (handles, numbers, a `void **` as its address, checkpoints as bytes). Arrays
 * are buffers whose element type and count are read from them, never passed beside them. Callbacks are Python
 * callables, called through the trampolines below, the only hand-written C. No policy, default or check is here. */
%begin %{
#include <errno.h> /* SWIG's runtime uses errno; Python.h includes errno.h only outside the limited API */
%}
%{
#define SHARDOPT_EXPERIMENTAL /* shardopt_comm_create_inprocess_member, pipelines */
#include "shardopt.h"

/* The module keeps to the limited API (the stable ABI: one build loads on every Python from 3.11, see python.cmake):
 * no struct of the interpreter's is read; a type's name is its __name__ (PyType_GetName is 3.11's, the module also
 * builds for older Pythons without the limited API). */
static PyObject *so_type_name(PyObject *type) { return PyObject_GetAttrString(type, "__name__"); }
#ifdef Py_LIMITED_API /* SO_PY_LIMITED_API below: the build's check (bindings.python_abi3) */
#define SO_LIMITED_API_VERSION Py_LIMITED_API
#else
#define SO_LIMITED_API_VERSION 0
#endif

static PyObject *so_error[SHARDOPT_ERR_INTERNAL + 1]; /* by status; [0] ShardoptError, their base */
static __thread PyObject *so_pending[3]; /* a Python callback's exception on this thread (type, value, tb) */
/* The error of the call that failed on this thread: the exception of the callback that failed it, or the library's. */
static void so_raise(shardopt_status st) {
    PyObject *cls = so_error[st > 0 && st <= SHARDOPT_ERR_INTERNAL ? st : SHARDOPT_ERR_INTERNAL];
    PyObject *msg, *attrs, *e = NULL, *dict = NULL;
    if (so_pending[0]) { /* the callback's exception, raised here on its own thread */
        PyErr_Restore(so_pending[0], so_pending[1], so_pending[2]);
        so_pending[0] = so_pending[1] = so_pending[2] = NULL;
        return;
    }
    msg = PyUnicode_FromFormat("%s: %s", shardopt_status_name(st), shardopt_last_error_message());
    attrs = Py_BuildValue("{s:i,s:s,s:i}", "status", st, "status_name", shardopt_status_name(st), "rank",
                          shardopt_last_error_rank());
    if (msg && attrs) e = PyObject_CallFunctionObjArgs(cls, msg, NULL);
    if (e && (dict = PyObject_GenericGetDict(e, NULL)) && PyDict_Update(dict, attrs) == 0) PyErr_SetObject(cls, e);
    Py_XDECREF(dict); Py_XDECREF(e); Py_XDECREF(attrs); Py_XDECREF(msg);
}

/* Ends a trampoline's Python call r (NULL: it raised): 0 with its number in *out (when out is given), else 1 with the
 * exception kept for so_raise and its text told to the library (shardopt_model_error): every rank's error names it. */
static int so_done(PyObject *r, double *out) {
    PyObject *t, *v, *tb, *name, *text;
    const char *s;
    if (r && out) *out = PyFloat_AsDouble(r);
    Py_XDECREF(r);
    if (r && !PyErr_Occurred()) return 0;
    PyErr_Fetch(&t, &v, &tb), PyErr_NormalizeException(&t, &v, &tb);
    name = so_type_name(t);
    text = name ? PyUnicode_FromFormat("%U: %S", name, v) : NULL;
    s = text ? PyUnicode_AsUTF8AndSize(text, NULL) : name ? PyUnicode_AsUTF8AndSize(name, NULL) : NULL;
    shardopt_model_error(s ? s : "a Python callback raised an exception");
    PyErr_Clear(), Py_XDECREF(text), Py_XDECREF(name);
    if (so_pending[0]) { Py_XDECREF(t); Py_XDECREF(v); Py_XDECREF(tb); }
    else { so_pending[0] = t; so_pending[1] = v; so_pending[2] = tb; }
    return 1;
}

#define SO_ADDR(p) PyLong_FromVoidPtr((void *)(p))
#define SO_CALL(expr, out) do { PyGILState_STATE g_ = PyGILState_Ensure(); int rc_ = so_done(expr, out); \
                                PyGILState_Release(g_); return rc_; } while (0)

/* shardopt_batch_fn: fn(dataset, params address, grad address or None, samples address, sample count, epoch, step,
 * device: -1 for host memory, else the CUDA device of params and grad, stream address) */
static int so_batch(void *fn, const shardopt_batch *b, double *loss) {
    SO_CALL(PyObject_CallFunction((PyObject *)fn, "iNNNniLiN", (int)b->dataset, SO_ADDR(b->params),
                                  b->grad ? SO_ADDR(b->grad) : (Py_INCREF(Py_None), Py_None), SO_ADDR(b->samples),
                                  (Py_ssize_t)b->sample_count, (int)b->epoch, (long long)b->step,
                                  b->on_device ? (int)b->device : -1, SO_ADDR(b->cuda_stream)), loss);
}
/* shardopt_write_fn: fn(bytes), the stream's next piece (serialize_to) */
static int so_write(void *fn, const void *data, size_t size) {
    SO_CALL(PyObject_CallFunction((PyObject *)fn, "N", PyBytes_FromStringAndSize((const char *)data, (Py_ssize_t)size)),
            NULL);
}
/* shardopt_lr_fn: fn(t, base) -> rate */
static int so_lr(void *fn, int64_t t, double base, double *lr) {
    SO_CALL(PyObject_CallFunction((PyObject *)fn, "Ld", (long long)t, base), lr);
}
/* A stage: stage._forward(call, input address, count, output) -> loss; stage._backward(call, input address, count,
 * output_grad address, count, input_grad address) */
static int so_forward(void *stage, const shardopt_stage_call *call, const void *input, size_t n,
                      shardopt_activation output, double *loss) {
    SO_CALL(PyObject_CallMethod((PyObject *)stage, "_forward", "NNnN",
                                SWIG_NewPointerObj((void *)call, SWIGTYPE_p_shardopt_stage_call, 0), SO_ADDR(input),
                                (Py_ssize_t)n, SWIG_NewPointerObj(output, SWIGTYPE_p_shardopt_activation_s, 0)), loss);
}
static int so_backward(void *stage, const shardopt_stage_call *call, const void *input, size_t n,
                       const void *output_grad, size_t m, void *input_grad) {
    SO_CALL(PyObject_CallMethod((PyObject *)stage, "_backward", "NNnNnN",
                                SWIG_NewPointerObj((void *)call, SWIGTYPE_p_shardopt_stage_call, 0), SO_ADDR(input),
                                (Py_ssize_t)n, SO_ADDR(output_grad), (Py_ssize_t)m, SO_ADDR(input_grad)), NULL);
}

/* o's buffer into v (C-contiguous, writable when asked) with its element type and count. */
static int so_buffer(PyObject *o, Py_buffer *v, int writable, shardopt_dtype *dtype, size_t *count) {
    static const struct { char format; int size; shardopt_dtype dtype; } k[] = {
        {'f', 4, SHARDOPT_F32}, {'d', 8, SHARDOPT_F64}, {'e', 2, SHARDOPT_F16}, {'i', 4, SHARDOPT_I32},
        {'l', 4, SHARDOPT_I32}, {'l', 8, SHARDOPT_I64}, {'q', 8, SHARDOPT_I64}, {'B', 1, SHARDOPT_U8}};
    const char *f;
    if (!PyObject_CheckBuffer(o)) {
        PyObject *name = so_type_name((PyObject *)Py_TYPE(o));
        if (name) PyErr_Format(PyExc_TypeError, "an array must be a numpy array or other buffer, not %U", name);
        Py_XDECREF(name);
        return 0;
    }
    if (PyObject_GetBuffer(o, v, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) != 0) {
        PyErr_Clear();
        return PyErr_Format(PyExc_ValueError, "the array must be a %sC-contiguous buffer", writable ? "writable " : ""), 0;
    }
    f = v->format + (strchr("<=@", v->format[0]) && v->format[0] ? 1 : 0);
    for (size_t i = 0; i < sizeof k / sizeof k[0]; ++i)
        if (f[0] == k[i].format && !f[1] && v->itemsize == k[i].size) {
            *dtype = k[i].dtype;
            *count = (size_t)(v->len / v->itemsize);
            return 1;
        }
    PyErr_Format(PyExc_ValueError, "unsupported dtype (format '%s'): float32, float64, float16, int32, int64, uint8", v->format);
    PyBuffer_Release(v);
    return 0;
}

/* allgather (gather 1) and reduce_scatter (0): the send buffer in v, a new bytearray for the result. */
static PyObject *so_gather_scatter(shardopt_comm comm, PyObject *o, Py_buffer *v, int gather, void **recv,
                                   size_t *count, shardopt_dtype *dtype) {
    int ws = 1;
    PyObject *out = NULL;
    if (!so_buffer(o, v, 0, dtype, count)) return NULL;
    shardopt_comm_size(comm, &ws); /* a bad handle fails the call itself */
    if (!gather && *count % (size_t)ws)
        return PyErr_Format(PyExc_ValueError, "reduce_scatter needs a multiple of the world size (%d) elements, "
                            "got %zu", ws, *count);
    if (!gather) *count /= (size_t)ws;
    if ((out = PyByteArray_FromStringAndSize(NULL, gather ? v->len * ws : v->len / ws))) *recv = PyByteArray_AsString(out);
    return out;
}

/* DLPack capsules of device views (shardopt/_dlpack.py builds the tensor): one never consumed has its tensor's deleter
 * called by the capsule's destructor, which keeps an exception being raised (it may run in a consumer's error path,
 * where Python code must not see the exception). */
typedef struct { void *data; int32_t device[2], ndim; uint8_t dtype[4]; int64_t *shape, *strides; uint64_t offset; } so_dltensor;
typedef struct { so_dltensor t; void *ctx; void (*deleter)(void *); } so_dlmanaged;
typedef struct { uint32_t version[2]; void *ctx; void (*deleter)(void *); } so_dlmanaged_versioned;
static void so_dlpack_destroy(PyObject *capsule) {
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
        so_dlmanaged_versioned *m = (so_dlmanaged_versioned *)PyCapsule_GetPointer(capsule, "dltensor_versioned");
        m->deleter(m);
    } else if (PyCapsule_IsValid(capsule, "dltensor")) {
        so_dlmanaged *m = (so_dlmanaged *)PyCapsule_GetPointer(capsule, "dltensor");
        m->deleter(m);
    }
    PyErr_Restore(t, v, tb);
}
%}
/* it makes a Python object: called holding the GIL (-threads releases it around every other call; CPython 3.12 crashes
 * allocating without it) */
%nothread so_dlpack_capsule;
%inline %{
PyObject *so_dlpack_capsule(unsigned long long tensor, int versioned) {
    return PyCapsule_New((void *)(uintptr_t)tensor, versioned ? "dltensor_versioned" : "dltensor", so_dlpack_destroy);
}
%}

%init %{
{
    static const char *names[] = {"ShardoptError", "InvalidArgumentError", "InvalidStateError",
                                  "CollectiveTimeoutError", "MismatchError", "PeerLostError", "FileIOError",
                                  "CorruptDataError", "OutOfMemoryError", "UnsupportedError", "InternalError"};
    PyObject *also[][2] = {{NULL, NULL}, {PyExc_ValueError, NULL}, {PyExc_RuntimeError, NULL},
                           {PyExc_RuntimeError, PyExc_TimeoutError}, {PyExc_RuntimeError, NULL},
                           {PyExc_RuntimeError, PyExc_ConnectionError}, {PyExc_OSError, NULL}, {PyExc_OSError, NULL},
                           {PyExc_MemoryError, NULL}, {PyExc_NotImplementedError, NULL}, {PyExc_RuntimeError, NULL}};
    char name[64];
    for (int i = 0; i <= SHARDOPT_ERR_INTERNAL; ++i) { /* each status's class: ShardoptError and what Python expects */
        PyObject *bases = !i ? NULL : PyTuple_Pack(also[i][1] ? 3 : 2, so_error[0], also[i][0], also[i][1]);
        snprintf(name, sizeof name, "shardopt.%s", names[i]);
        so_error[i] = PyErr_NewException(name, i ? bases : PyExc_Exception, NULL);
        Py_XDECREF(bases);
        PyDict_SetItemString(d, names[i], so_error[i]);
    }
}
%}

%include <stdint.i>
%include <typemaps.i>
/* The status is not returned: the outputs are (none: None). The result stays NULL until an output is appended, as
 * appending to None keeps the None when the C function is not void (SWIG >= 4.3: [None, output]). */
%typemap(out) shardopt_status {
    if ($1 != SHARDOPT_OK) { so_raise($1); SWIG_fail; }
    $result = NULL;
}
%typemap(ret) shardopt_status "if (!$result) $result = SWIG_Py_Void();"

/* outputs */
%define SO_HANDLE(T)
%typemap(in, numinputs=0) T * (T h = NULL) "$1 = &h;"
%typemap(argout) T * { %append_output(SWIG_NewPointerObj(h$argnum, $descriptor(T), 0)); }
%enddef
SO_HANDLE(shardopt_comm) SO_HANDLE(shardopt_params) SO_HANDLE(shardopt_optimizer) SO_HANDLE(shardopt_pipeline)
SO_HANDLE(shardopt_plan)
%apply int32_t *OUTPUT { int32_t *count, int32_t *fitting };
%apply int *OUTPUT { int *rank, int *size, int *index, int *count, int *bucket, int *stop, int *device };
%apply int *OUTPUT { shardopt_memory_space *memory };
%apply size_t *OUTPUT { size_t *count, size_t *padded_count };
%apply double *OUTPUT { double *lr }; %apply int64_t *OUTPUT { int64_t *steps };
%apply uint64_t *OUTPUT { uint64_t *bytes };
/* a CUDA stream (the sharding options' cuda_stream): its address as an int, None for NULL */
%typemap(in) void *cuda_stream { $1 = $input == Py_None ? NULL : PyLong_AsVoidPtr($input); if (PyErr_Occurred()) SWIG_fail; }
%typemap(out) void *cuda_stream { $result = SO_ADDR($1); }
%apply void *cuda_stream { void *consumer_stream };
%typemap(in, numinputs=0) void ** (void *p = NULL) "$1 = &p;"
%typemap(argout) void ** { %append_output(SO_ADDR(p$argnum)); }
%define SO_BYTES_OUT(ARGS, ELEMENT) /* library bytes (n elements of ELEMENT bytes), copied and freed */
%typemap(in, numinputs=0) ARGS (void *p = NULL, size_t n = 0) "$1 = &p; $2 = &n;"
%typemap(argout) ARGS {
    PyObject *bytes = PyBytes_FromStringAndSize((const char *)p$argnum, (Py_ssize_t)(n$argnum * ELEMENT));
    shardopt_buffer_free(p$argnum);
    if (!bytes) SWIG_fail;
    %append_output(bytes);
}
%enddef
SO_BYTES_OUT((void **data, size_t *size), 1)
SO_BYTES_OUT((void **recv, size_t *recv_count), "\4\10\2\2\4\10\1"[arg4]) /* scatter's part: arg4 is its dtype */

/* arrays */
%define SO_ARRAY(ARGS, WRITABLE, NONE, SET)
%typemap(in) ARGS (Py_buffer v = {0}, shardopt_dtype dt = SHARDOPT_F32, size_t n = 0) {
    if (!(NONE && $input == Py_None) && !so_buffer($input, &v, WRITABLE, &dt, &n)) SWIG_fail;
    SET
}
%typemap(freearg) ARGS "if (v$argnum.obj) PyBuffer_Release(&v$argnum);"
%enddef
SO_ARRAY((void *buffer, size_t count, shardopt_dtype dtype), 1, 0, $1 = v.buf; $2 = n; $3 = dt;)
SO_ARRAY((const void *buffer, size_t count, shardopt_dtype dtype), 0, 0, $1 = v.buf; $2 = n; $3 = dt;)
SO_ARRAY((const void *send, void *recv, size_t count, shardopt_dtype dtype), 1, 0, $1 = $2 = v.buf; $3 = n; $4 = dt;)
SO_ARRAY((void *packed, size_t count), 1, 0, $1 = v.buf; $2 = n;)
SO_ARRAY((const void *packed, size_t count), 0, 0, $1 = v.buf; $2 = n;)
/* the caller's parameter buffer: a writable buffer (host memory), or a tuple (address, count) of device memory, which
 * the layer (ShardedOptimizer.initialize) checked and keeps alive */
%typemap(in) (void *param_buffer, size_t param_count) (Py_buffer v = {0}, shardopt_dtype dt = SHARDOPT_F32, size_t n = 0) {
    if (PyTuple_Check($input) && PyTuple_Size($input) == 2) {
        $1 = PyLong_AsVoidPtr(PyTuple_GetItem($input, 0));
        $2 = PyLong_AsSize_t(PyTuple_GetItem($input, 1));
        if (PyErr_Occurred()) SWIG_fail;
    } else if (!so_buffer($input, &v, 1, &dt, &n)) SWIG_fail;
    else $1 = v.buf, $2 = n;
}
%typemap(freearg) (void *param_buffer, size_t param_count) "if (v$argnum.obj) PyBuffer_Release(&v$argnum);"
SO_ARRAY((const void *data, size_t size), 0, 0, $1 = v.buf; $2 = (size_t)v.len;)
SO_ARRAY(const void *initial, 0, 1, $1 = v.buf;) /* None: NULL (zeros) */
%define SO_GATHER_SCATTER(COUNT, GATHER) /* the send buffer; the result, a new bytearray, returned */
%typemap(in) (const void *send, void *recv, size_t COUNT, shardopt_dtype dtype) (Py_buffer v = {0}, PyObject *o = 0)
    "if (!(o = so_gather_scatter(arg1, $input, &v, GATHER, &$2, &$3, &$4))) SWIG_fail; $1 = v.buf;"
%typemap(argout) (const void *send, void *recv, size_t COUNT, shardopt_dtype dtype) { %append_output(o$argnum); o$argnum = 0; }
%typemap(freearg) (const void *send, void *recv, size_t COUNT, shardopt_dtype dtype)
    "if (v$argnum.obj) PyBuffer_Release(&v$argnum); Py_XDECREF(o$argnum);"
%enddef
SO_GATHER_SCATTER(send_count, 1)
SO_GATHER_SCATTER(recv_count, 0)
/* the caller-owned buffers of a training result: arrays the caller keeps alive through the call */
%typemap(in) void *best_parameters, double *training_loss_history, double *validation_loss_history,
    double *learning_rate_history { Py_buffer v = {0}; shardopt_dtype dt; size_t n;
    if (!so_buffer($input, &v, 1, &dt, &n)) SWIG_fail; $1 = ($1_ltype)v.buf; PyBuffer_Release(&v); }

/* callbacks: Python callables (kept alive by the caller while the library may call them) */
%typemap(in) (shardopt_batch_fn model, void *user_data) {
    if (!PyCallable_Check($input)) SWIG_exception_fail(SWIG_TypeError, "the model must be callable");
    $1 = so_batch, $2 = $input;
}
/* serialize_to's writer: None for a rank that wants no bytes (NULL) */
%typemap(in) (shardopt_write_fn write, void *user_data) {
    if ($input != Py_None && !PyCallable_Check($input)) SWIG_exception_fail(SWIG_TypeError, "the writer must be callable or None");
    $1 = $input == Py_None ? NULL : so_write, $2 = $input;
}
%typemap(in) void *lr_user_data "$1 = $input;"
%constant shardopt_lr_fn SO_PY_LR_FN = so_lr; /* set lr_fn to it, lr_user_data to the callable */
%constant int SO_PY_LIMITED_API = SO_LIMITED_API_VERSION; /* the Py_LIMITED_API it was compiled with, else 0 */
%typemap(in) const shardopt_pipeline_stage *stage (shardopt_pipeline_stage s) {
    s.struct_size = sizeof s, s.forward = so_forward, s.backward = so_backward, s.user_data = $input, $1 = &s;
}

/* structs: made with their struct_size set (output structs need it), copied with copy() */
%define SO_STRUCT(T)
%newobject T::copy;
%extend T {
    T() { T *p = (T *)calloc(1, sizeof(T)); if (p) p->struct_size = sizeof(T); return p; }
    T *copy() { T *p = (T *)malloc(sizeof(T)); if (p) *p = *$self; return p; }
}
%enddef
SO_STRUCT(shardopt_optimizer_options) SO_STRUCT(shardopt_sharding_options) SO_STRUCT(shardopt_training_options)
SO_STRUCT(shardopt_training_result) SO_STRUCT(shardopt_step_result) SO_STRUCT(shardopt_memory_stats)
SO_STRUCT(shardopt_elastic_options) SO_STRUCT(shardopt_elastic_status) SO_STRUCT(shardopt_pipeline_options)
SO_STRUCT(shardopt_pipeline_result) SO_STRUCT(shardopt_plan_cluster) SO_STRUCT(shardopt_plan_request)
SO_STRUCT(shardopt_plan_entry) SO_STRUCT(shardopt_checkpoint_info)

/* not wrapped: what needs a buffer alive after the call (async collectives, work handles, CUDA streams), the
 * all-ranks-at-once in-process group (each rank claims its own), the first training loop (train replaces it), and
 * what only C callers need */
%rename("$ignore", regextarget=1) "_async$|^shardopt_(work|optimize_|optimizer_optimize$|buffer_free$|batch$)";
%rename("$ignore", regextarget=1) "^shardopt_(comm_create_inprocess|comm_set_cuda_stream|pipeline_stage)$";
#define SHARDOPT_API
#define SHARDOPT_EXPERIMENTAL
%include "shardopt.h"

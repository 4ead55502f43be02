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
#if defined(SWIGPYTHON)
%{
typedef struct so_py_stage {
    PyObject *forward, *backward;
    shardopt_optimizer opt;
    size_t element_size;
} so_py_stage;

static void so_py_stage_free(void *p) {
    so_py_stage *s = (so_py_stage *)p;
    PyGILState_STATE gil = PyGILState_Ensure();
    Py_XDECREF(s->forward);
    Py_XDECREF(s->backward);
    PyGILState_Release(gil);
    free(s);
}

/* After a failed Python call: keeps this thread's first exception to re-raise from run, and tells
 * the library why (so the other stages' errors name it). */
static int so_py_stage_failed(void) {
    if (PyErr_Occurred()) {
        if (!so_py_et) {
            PyErr_Fetch(&so_py_et, &so_py_ev, &so_py_tb);
            PyErr_NormalizeException(&so_py_et, &so_py_ev, &so_py_tb);
            so_py_report_model_error(so_py_et, so_py_ev);
        } else {
            PyErr_Clear();
        }
    } else {
        shardopt_model_error("the stage callback failed without an exception");
    }
    return 1;
}

/* forward(micro_batch, chunk, model_chunk, first, last, input_address, input_count) -> loss */
static int so_py_stage_forward(void *user, const shardopt_stage_call *call, const void *input, size_t input_count,
                               shardopt_activation output, double *loss) {
    so_py_stage *s = (so_py_stage *)user;
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject *r;
    int rc = 0;
    SO_STAGE_ENTER(ctx, call, output, s->opt, s->element_size);
    r = PyObject_CallFunction(s->forward, "iiiiiNn", (int)call->micro_batch, (int)call->chunk, (int)call->model_chunk,
                              (int)call->first, (int)call->last, PyLong_FromVoidPtr(SO_STAGE_ADDR(input)),
                              (Py_ssize_t)input_count);
    SO_STAGE_LEAVE();
    if (r) {
        double v = PyFloat_AsDouble(r);
        Py_DECREF(r);
        if (v == -1.0 && PyErr_Occurred()) rc = so_py_stage_failed();
        else *loss = v;
    } else {
        rc = so_py_stage_failed();
    }
    PyGILState_Release(gil);
    return rc;
}

/* backward(micro_batch, chunk, model_chunk, first, last, input_address, input_count,
 *          output_grad_address, output_grad_count, input_grad_address) */
static int so_py_stage_backward(void *user, const shardopt_stage_call *call, const void *input, size_t input_count,
                                const void *output_grad, size_t output_grad_count, void *input_grad) {
    so_py_stage *s = (so_py_stage *)user;
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject *r;
    int rc = 0;
    SO_STAGE_ENTER(ctx, call, NULL, s->opt, s->element_size);
    r = PyObject_CallFunction(s->backward, "iiiiiNnNnN", (int)call->micro_batch, (int)call->chunk,
                              (int)call->model_chunk, (int)call->first, (int)call->last,
                              PyLong_FromVoidPtr(SO_STAGE_ADDR(input)), (Py_ssize_t)input_count,
                              PyLong_FromVoidPtr(SO_STAGE_ADDR(output_grad)), (Py_ssize_t)output_grad_count,
                              PyLong_FromVoidPtr(SO_STAGE_ADDR(input_grad)));
    SO_STAGE_LEAVE();
    if (r) Py_DECREF(r);
    else rc = so_py_stage_failed();
    PyGILState_Release(gil);
    return rc;
}
#define SO_STAGE_FOREIGN_PENDING() (so_py_et != NULL)
%}
%apply PyObject *CALLABLE { PyObject *FORWARD, PyObject *BACKWARD }
%inline %{
so_pipeline_s *so_pipeline_create_py(shardopt_optimizer opt, PyObject *FORWARD, PyObject *BACKWARD, size_t element_size,
                                     int micro_batches, int schedule, int virtual_stages) {
    so_py_stage *s = (so_py_stage *)calloc(1, sizeof *s);
    if (!s) {
        so_fail(SHARDOPT_ERR_OUT_OF_MEMORY, "no memory for a pipeline stage");
        return NULL;
    }
    {
        PyGILState_STATE gil = PyGILState_Ensure();
        Py_INCREF(FORWARD);
        Py_INCREF(BACKWARD);
        PyGILState_Release(gil);
    }
    s->forward = FORWARD;
    s->backward = BACKWARD;
    s->opt = opt;
    s->element_size = element_size;
    return so_pipeline_make(opt, so_py_stage_forward, so_py_stage_backward, s, so_py_stage_free, micro_batches,
                            schedule, virtual_stages);
}
/* The forward's output activation: a copy of the buffer (its bytes must be whole elements). */
void so_py_stage_output(const void *RBUF, size_t RBYTES) {
    void *dst = NULL;
    so_stage_ctx *c = so_stage_context("so_py_stage_output");
    if (!c) return;
    if (!c->output) {
        so_fail(SHARDOPT_ERR_INVALID_STATE, "a backward has no output activation");
        return;
    }
    if (RBYTES % c->element_size != 0) {
        so_fail(SHARDOPT_ERR_INVALID_ARGUMENT, "the output holds %zu bytes, not whole %zu-byte elements", RBYTES,
                c->element_size);
        return;
    }
    SO_TRY(shardopt_activation_resize(c->output, RBYTES / c->element_size, &dst), SO_VOID);
    if (RBYTES) memcpy(dst, RBUF, RBYTES);
}
%}

#elif defined(SWIGJAVA)
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

#elif defined(SWIGCSHARP)
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
#endif

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

/* The GPU entry points of the ABI on any machine. On a host without a usable GPU (or a build
 * without CUDA, or without NCCL) the GPU backends fail cleanly: UNSUPPORTED, nothing written,
 * and a message that says why; with a GPU they succeed and are used a little. An optimizer in
 * CUDA memory (memory = SHARDOPT_MEMORY_CUDA) over a communicator without a device is refused
 * with a message naming its backend, after the same argument checks as host memory. Where a GPU
 * communicator can be created (a GPU, or the CUDA stand-in of test_capi_gpu_standin, also on 2
 * processes), the optimizer in CUDA memory is driven through the whole ABI
 * (test_gpu_device_memory) and checked against the same training in host memory on one rank
 * (every rank is given the same gradients, so their average is exact). */
#include <math.h>
#include <stdlib.h>

#include "harness.h"
#include "tests.h"

/* cuda_copy.cpp: 0 copied, 1 no CUDA runtime in this program, 2 failed. */
int test_cuda_copy(void *dst, const void *src, size_t bytes);
/* 1: ptr is device memory. */
int test_cuda_is_device(const void *ptr);

static int contains(const char *text, const char *part) { return strstr(text, part) != NULL; }

/* backend `name` (given directly, or through $SHARDOPT_BACKEND) as a world of one. */
static void gpu_backend(const char *name, int via_env) {
    shardopt_comm sentinel = (shardopt_comm)&sentinel, c = sentinel;
    shardopt_status s;
    char quoted[32];
    snprintf(quoted, sizeof quoted, "backend '%s'", name);
    unsetenv("SHARDOPT_WORLD_SIZE");
    if (via_env) setenv("SHARDOPT_BACKEND", name, 1);
    s = shardopt_comm_create_from_env(via_env ? NULL : name, &c);
    unsetenv("SHARDOPT_BACKEND");
    if (s == SHARDOPT_OK) { /* a GPU (and for nccl, a loadable NCCL) is here */
        int size = -1;
        CHECK(c != sentinel && c != NULL);
        CHECK_OK(shardopt_comm_size(c, &size));
        CHECK(size == 1);
        CHECK_OK(shardopt_comm_set_cuda_stream(c, NULL));
        CHECK_OK(shardopt_barrier(c));
        CHECK_OK(shardopt_comm_destroy(c));
        return;
    }
    {
        const char *m = shardopt_last_error_message();
        /* why: not built in, NCCL not loadable ("is not available: ..."), or no device */
        const int says_why = contains(m, "no CUDA device") || contains(m, "is not available");
        harness_record(s == SHARDOPT_ERR_UNSUPPORTED && c == sentinel && contains(m, "shardopt_comm_create_from_env") &&
                           contains(m, quoted) && says_why,
                       __FILE__, __LINE__, name, m);
    }
}

static void test_gpu_backends(void) {
    gpu_backend("nccl", 0);
    gpu_backend("staged", 0);
    gpu_backend("nccl", 1);
    gpu_backend("staged", 1);
}

static shardopt_optimizer make_host_optimizer(shardopt_comm comm) {
    shardopt_params p = make_params_a6_b3();
    shardopt_optimizer_options o;
    shardopt_sharding_options s;
    shardopt_optimizer opt = NULL;
    CHECK_OK(shardopt_optimizer_options_init(&o));
    CHECK_OK(shardopt_sharding_options_init(&s));
    CHECK_OK(shardopt_optimizer_create(comm, p, &o, &s, NULL, &opt));
    CHECK_OK(shardopt_params_destroy(p));
    return opt;
}

/* shardopt_comm_create: AiDotNet's NCCLCommunicationBackend(rank, worldSize, deviceId). */
static void test_comm_create_args(void) {
    static const char *const gpus[] = {"nccl", "staged"};
    shardopt_comm sentinel = (shardopt_comm)&sentinel, c = sentinel;
    int device = 7;
    size_t i;
    unsetenv("SHARDOPT_WORLD_SIZE");
    unsetenv("SHARDOPT_RANK");
    CHECK_ERR(shardopt_comm_create("gloo", 0, 1, -1, &c), SHARDOPT_ERR_INVALID_ARGUMENT, "unknown backend 'gloo'");
    CHECK_ERR(shardopt_comm_create(NULL, 0, 1, -1, &c), SHARDOPT_ERR_INVALID_ARGUMENT, "backend is NULL");
    CHECK_ERR(shardopt_comm_create("nccl", 0, 1, -1, NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "comm is NULL");
    CHECK_ERR(shardopt_comm_create("nccl", 0, -1, -1, &c), SHARDOPT_ERR_INVALID_ARGUMENT, "give both");
    CHECK_ERR(shardopt_comm_create("nccl", 2, 2, -1, &c), SHARDOPT_ERR_INVALID_ARGUMENT, "rank 2 of worldSize 2");
    CHECK_ERR(shardopt_comm_create("staged", 0, 0, -1, &c), SHARDOPT_ERR_INVALID_ARGUMENT, "worldSize >= 1");
    CHECK_ERR(shardopt_comm_create("staged", 0, 1, -2, &c), SHARDOPT_ERR_INVALID_ARGUMENT, "deviceId -2");
    CHECK_ERR(shardopt_comm_create("ucx", 0, 1, 0, &c), SHARDOPT_ERR_INVALID_ARGUMENT, "has no device");
    /* a launcher's world that the arguments contradict: both sides named */
    setenv("SHARDOPT_WORLD_SIZE", "2", 1);
    setenv("SHARDOPT_RANK", "1", 1);
    CHECK_ERR(shardopt_comm_create("nccl", 0, 1, -1, &c), SHARDOPT_ERR_INVALID_ARGUMENT,
              "the arguments say rank 0 of 1, the launcher's environment says rank 1 of 2");
    unsetenv("SHARDOPT_WORLD_SIZE");
    unsetenv("SHARDOPT_RANK");
    CHECK(c == sentinel);
    for (i = 0; i < 2; ++i) { /* AiDotNet's defaults: rank 0 of 1, the local rank's GPU */
        shardopt_status s = shardopt_comm_create(gpus[i], 0, 1, -1, &c);
        if (s == SHARDOPT_OK) {
            int size = 0;
            CHECK_OK(shardopt_comm_size(c, &size));
            CHECK(size == 1);
            CHECK_OK(shardopt_comm_device(c, &device));
            CHECK(device >= 0);
            CHECK_OK(shardopt_comm_destroy(c));
            c = sentinel;
        } else {
            const char *m = shardopt_last_error_message();
            harness_record(s == SHARDOPT_ERR_UNSUPPORTED && c == sentinel && contains(m, "shardopt_comm_create") &&
                               (contains(m, "no CUDA device") || contains(m, "is not available")),
                           __FILE__, __LINE__, gpus[i], m);
        }
    }
    CHECK_OK(shardopt_comm_create_inprocess(1, &c));
    CHECK_OK(shardopt_comm_device(c, &device));
    CHECK(device == -1);
    CHECK_ERR(shardopt_comm_device(c, NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "device is NULL");
    CHECK_ERR(shardopt_comm_device(NULL, &device), SHARDOPT_ERR_INVALID_ARGUMENT, "NULL");
    {
        shardopt_optimizer opt = make_host_optimizer(c);
        shardopt_memory_space memory = SHARDOPT_MEMORY_CUDA;
        void *stream = &device;
        device = 7;
        CHECK_OK(shardopt_optimizer_device(opt, &memory, &device, &stream));
        CHECK(memory == SHARDOPT_MEMORY_HOST && device == -1 && stream == NULL);
        CHECK_OK(shardopt_optimizer_device(opt, NULL, NULL, NULL));
        CHECK_ERR(shardopt_optimizer_device(NULL, &memory, NULL, NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "NULL");
        /* host memory: nothing in flight on a device to order a consumer's stream after */
        CHECK_OK(shardopt_optimizer_order_stream(opt, NULL));
        CHECK_ERR(shardopt_optimizer_order_stream(NULL, NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "NULL");
        CHECK_OK(shardopt_optimizer_destroy(opt));
    }
    CHECK_OK(shardopt_comm_destroy(c));
}

/* A communicator that is not a GPU one: no optimizer in CUDA memory, no CUDA stream. */
static void no_device(shardopt_comm comm, const char *backend) {
    shardopt_params p = make_params_a6_b3();
    shardopt_optimizer_options o;
    shardopt_sharding_options s;
    shardopt_optimizer sentinel = (shardopt_optimizer)&sentinel, opt = sentinel;
    float init[9] = {0};
    int stream_storage = 0;
    char why[96];
    CHECK_OK(shardopt_optimizer_options_init(&o));
    CHECK_OK(shardopt_sharding_options_init(&s));
    s.memory = SHARDOPT_MEMORY_CUDA;
    snprintf(why, sizeof why, "communicator of backend '%s' has no device", backend);
#ifdef SHARDOPT_TEST_HAVE_CUDA
    CHECK_ERR(shardopt_optimizer_create(comm, p, &o, &s, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT, why);
    s.cuda_stream = &stream_storage;
    CHECK_ERR(shardopt_optimizer_create(comm, p, &o, &s, init, &opt), SHARDOPT_ERR_INVALID_ARGUMENT, why);
#else
    CHECK_ERR(shardopt_optimizer_create(comm, p, &o, &s, NULL, &opt), SHARDOPT_ERR_UNSUPPORTED, "built without CUDA");
    s.cuda_stream = &stream_storage;
    CHECK_ERR(shardopt_optimizer_create(comm, p, &o, &s, init, &opt), SHARDOPT_ERR_UNSUPPORTED, "built without CUDA");
#endif
    CHECK(opt == sentinel);
    /* ZeRO-Offload of every part with CUDA memory: the field check accepts it before the strategy is chosen (the
     * languages set the strategy after the configuration), create checks it with the strategy */
    s.cuda_stream = NULL;
    CHECK_OK(shardopt_sharding_options_init_preset(&s, sizeof s, SHARDOPT_SHARDING_ZERO_OFFLOAD_FULL));
    s.memory = SHARDOPT_MEMORY_CUDA;
    CHECK_OK(shardopt_sharding_options_validate_strict(&s));
#ifdef SHARDOPT_TEST_HAVE_CUDA
    s.strategy = SHARDOPT_DDP;
    CHECK_ERR(shardopt_optimizer_create(comm, p, &o, &s, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT,
              "cpu_offload_params needs parameters sharded at rest");
    s.strategy = SHARDOPT_FSDP;
    CHECK_ERR(shardopt_optimizer_create(comm, p, &o, &s, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT, why);
#endif
    CHECK(opt == sentinel);
    CHECK_ERR(shardopt_comm_set_cuda_stream(comm, &stream_storage), SHARDOPT_ERR_INVALID_ARGUMENT, why);
    CHECK_ERR(shardopt_comm_set_cuda_stream(comm, NULL), SHARDOPT_ERR_INVALID_ARGUMENT, why);
    CHECK_OK(shardopt_params_destroy(p));
}

/* With memory CUDA the argument checks before anything is built are those of host memory. */
static void creation_errors(shardopt_comm comm) {
    shardopt_params p = make_params_a6_b3(), empty = NULL;
    shardopt_optimizer_options o;
    shardopt_sharding_options s;
    shardopt_optimizer sentinel = (shardopt_optimizer)&sentinel, opt = sentinel;
    CHECK_OK(shardopt_optimizer_options_init(&o));
    CHECK_OK(shardopt_sharding_options_init(&s));
    s.memory = SHARDOPT_MEMORY_CUDA;
    CHECK_ERR(shardopt_optimizer_create(NULL, p, &o, &s, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT,
              "communicator handle is NULL");
    CHECK_ERR(shardopt_optimizer_create(comm, NULL, &o, &s, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT,
              "parameter set handle is NULL");
    CHECK_ERR(shardopt_optimizer_create(comm, p, NULL, &s, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT,
              "optimizer options is NULL");
    CHECK_ERR(shardopt_optimizer_create(comm, p, &o, NULL, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT,
              "sharding options is NULL");
    CHECK_ERR(shardopt_optimizer_create(comm, p, &o, &s, NULL, NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "out is NULL");
    o.lr = -1.0;
    CHECK_ERR(shardopt_optimizer_create(comm, p, &o, &s, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT, "lr");
    CHECK_OK(shardopt_optimizer_options_init(&o));
    s.strategy = (shardopt_strategy)42;
    CHECK_ERR(shardopt_optimizer_create(comm, p, &o, &s, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT,
              "invalid strategy 42");
    s.strategy = SHARDOPT_DDP;
    CHECK_OK(shardopt_params_create(SHARDOPT_F32, 0, &empty));
    CHECK_ERR(shardopt_optimizer_create(comm, empty, &o, &s, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT, "no tensors");
    CHECK(opt == sentinel);
    CHECK_OK(shardopt_params_destroy(empty));
    CHECK_OK(shardopt_params_destroy(p));
}

static void test_no_device(void) {
    shardopt_comm c = NULL;
    CHECK_OK(shardopt_comm_create_inprocess(1, &c));
    no_device(c, "inprocess");
    creation_errors(c);
    CHECK_OK(shardopt_comm_destroy(c));
#ifdef SHARDOPT_TEST_HAVE_UCX
    setenv("SHARDOPT_WORLD_SIZE", "1", 1); /* a world of one, asked for */
    c = NULL;
    CHECK_OK(shardopt_comm_create_from_env("ucx", &c));
    unsetenv("SHARDOPT_WORLD_SIZE");
    no_device(c, "ucx");
    CHECK_OK(shardopt_comm_destroy(c));
#endif
}

/* --- the optimizer in CUDA memory ------------------------------------------------------------- */
#define N 9 /* tensor "a": 6 elements (bucket 0), tensor "b": 3 elements (bucket 1) */

static const float initial[N] = {0.5f, -1.f, 2.f, 0.25f, -0.75f, 1.5f, 3.f, -2.f, 1.f};

/* ZeRO-Offload levels of make(): none, the optimizer, + the gradients, + the parameters (FSDP). */
enum { OFFLOAD_NONE, OFFLOAD_OPTIMIZER, OFFLOAD_GRADIENTS, OFFLOAD_ALL };

static shardopt_optimizer make_offloaded(shardopt_comm comm, shardopt_memory_space memory, shardopt_strategy strategy,
                                         shardopt_optimizer_kind kind, int offload) {
    shardopt_params p = make_params_a6_b3();
    shardopt_optimizer_options o;
    shardopt_sharding_options s;
    shardopt_optimizer opt = NULL;
    CHECK_OK(shardopt_optimizer_options_defaults(kind, &o));
    o.lr = 0.05;
    CHECK_OK(shardopt_sharding_options_init(&s));
    s.strategy = strategy;
    s.memory = memory; /* cuda_stream NULL: the legacy default stream, where test_cuda_copy copies */
    s.cpu_offload_optimizer = offload >= OFFLOAD_OPTIMIZER ? SHARDOPT_ENABLE : SHARDOPT_DISABLE;
    s.cpu_offload_gradients = offload >= OFFLOAD_GRADIENTS ? SHARDOPT_ENABLE : SHARDOPT_DISABLE;
    s.cpu_offload_params = offload >= OFFLOAD_ALL ? SHARDOPT_ENABLE : SHARDOPT_DISABLE;
    CHECK_OK(shardopt_optimizer_create(comm, p, &o, &s, initial, &opt));
    CHECK_OK(shardopt_params_destroy(p));
    return opt;
}

static shardopt_optimizer make(shardopt_comm comm, shardopt_memory_space memory, shardopt_strategy strategy,
                               shardopt_optimizer_kind kind) {
    return make_offloaded(comm, memory, strategy, kind, OFFLOAD_NONE);
}

static int close_all(const float *a, const float *b, int n, float tolerance) {
    int i;
    for (i = 0; i < n; ++i)
        if (!(fabsf(a[i] - b[i]) <= tolerance * (1.f + fabsf(b[i])))) return 0;
    return 1;
}

/* The step protocol with device pointers: gradients written into bucket_grad/tensor_grad with
 * cudaMemcpy when this program has a CUDA runtime (else left as the optimizer cleared them:
 * zero), against the host optimizer given the same gradients. */
static void step_protocol(shardopt_comm gpu, shardopt_comm host_comm, shardopt_strategy strategy, int world,
                          int offload) {
    shardopt_optimizer dev = make_offloaded(gpu, SHARDOPT_MEMORY_CUDA, strategy, SHARDOPT_ADAM, offload);
    shardopt_optimizer host = make(host_comm, SHARDOPT_MEMORY_HOST, strategy, SHARDOPT_ADAM);
    int step, can_copy = 1;
    for (step = 0; step < 3; ++step) {
        float g[N], a[N], b[N];
        void *dg = NULL, *hg = NULL;
        size_t n = 0, i;
        shardopt_step_result dr = {.struct_size = sizeof dr}, hr = {.struct_size = sizeof hr};
        for (i = 0; i < N; ++i) g[i] = 0.1f * (float)((int)(i + (size_t)step) % 5 - 2);
        if (strategy == SHARDOPT_FSDP) { /* a forward: units gathered on the device */
            void *unit = NULL;
            CHECK_OK(shardopt_optimizer_gather(dev, 0, &unit));
            CHECK(unit != NULL);
            CHECK_OK(shardopt_optimizer_release(dev, 0));
        }
        CHECK_OK(shardopt_optimizer_zero_grad(dev));
        CHECK_OK(shardopt_optimizer_zero_grad(host));
        CHECK_OK(shardopt_optimizer_bucket_grad(dev, 0, &dg, &n));
        CHECK(dg != NULL && n == 6);
        if (can_copy) can_copy = test_cuda_copy(dg, g, 6 * sizeof(float)) == 0;
        CHECK_OK(shardopt_optimizer_bucket_grad(host, 0, &hg, &n));
        if (can_copy) memcpy(hg, g, 6 * sizeof(float));
        CHECK_OK(shardopt_optimizer_grad_ready(dev, 0));
        CHECK_OK(shardopt_optimizer_grad_ready(host, 0));
        CHECK_OK(shardopt_optimizer_tensor_grad(dev, 1, &dg, &n));
        CHECK(dg != NULL && n == 3);
        if (can_copy) CHECK(test_cuda_copy(dg, g + 6, 3 * sizeof(float)) == 0);
        CHECK_OK(shardopt_optimizer_tensor_grad(host, 1, &hg, &n));
        if (can_copy) memcpy(hg, g + 6, 3 * sizeof(float));
        CHECK_OK(shardopt_optimizer_grad_ready(dev, 1));
        CHECK_OK(shardopt_optimizer_grad_ready(host, 1));
        CHECK_OK(shardopt_optimizer_step(dev, &dr));
        CHECK_OK(shardopt_optimizer_step(host, &hr));
        CHECK(dr.applied == 1 && hr.applied == 1 && dr.skipped_nonfinite == 0);
        CHECK(fabs(dr.grad_norm - hr.grad_norm) <= 1e-6 * (1 + hr.grad_norm)); /* host values */
        CHECK(dr.reduce_wait_seconds >= 0 && dr.update_seconds >= 0 && dr.post_update_seconds >= 0);
        CHECK_OK(shardopt_optimizer_get_parameters(dev, a, N)); /* host memory */
        CHECK_OK(shardopt_optimizer_get_parameters(host, b, N));
        CHECK(close_all(a, b, N, 1e-6f));
    }
    if (!can_copy) printf("test_gpu: no CUDA runtime in this program: device gradients left zero\n");
    /* parameters: device pointers, the same values as get_parameters */
    if (strategy != SHARDOPT_FSDP) {
        void *all = NULL, *t1 = NULL;
        float a[N], b[N];
        CHECK_OK(shardopt_optimizer_parameters(dev, &all));
        CHECK_OK(shardopt_optimizer_tensor_parameters(dev, 1, &t1));
        CHECK(all != NULL && t1 == (void *)((char *)all + 6 * sizeof(float)));
        CHECK_OK(shardopt_optimizer_get_parameters(dev, b, N));
        if (test_cuda_copy(a, all, N * sizeof(float)) == 0) CHECK(memcmp(a, b, sizeof a) == 0);
    } else {
        void *unit = NULL, *t1 = NULL;
        float a[3], b[N];
        CHECK_ERR(shardopt_optimizer_parameters(dev, &unit), SHARDOPT_ERR_INVALID_STATE, "FSDP");
        CHECK_OK(shardopt_optimizer_gather(dev, 1, &unit));
        CHECK_OK(shardopt_optimizer_tensor_parameters(dev, 1, &t1));
        CHECK(unit != NULL && t1 == unit);
        CHECK_OK(shardopt_optimizer_get_parameters(dev, b, N));
        if (test_cuda_copy(a, unit, sizeof a) == 0) CHECK(memcmp(a, b + 6, sizeof a) == 0);
        CHECK_OK(shardopt_optimizer_release(dev, 1));
    }
    {
        shardopt_memory_stats dm = {.struct_size = sizeof dm}, hm = {.struct_size = sizeof hm};
        int stop = -1;
        int64_t steps = -1;
        CHECK_OK(shardopt_optimizer_memory_stats(dev, &dm));
        CHECK_OK(shardopt_optimizer_memory_stats(host, &hm));
        CHECK(dm.total_bytes == dm.params_bytes + dm.grads_bytes + dm.optimizer_state_bytes + dm.buffer_bytes);
        CHECK(dm.host_total_bytes == dm.host_params_bytes + dm.host_grads_bytes + dm.host_optimizer_state_bytes);
        if (offload == OFFLOAD_NONE) {
            CHECK((world > 1 || dm.params_bytes == hm.params_bytes) && dm.params_bytes > 0 &&
                  dm.optimizer_state_bytes > 0 && dm.host_total_bytes == 0);
        } else { /* the state and master weights in host memory; the gradients too, then the parameters */
            CHECK(dm.optimizer_state_bytes == 0 && dm.host_optimizer_state_bytes > 0);
            CHECK(dm.host_grads_bytes > 0 && (offload < OFFLOAD_GRADIENTS || dm.grads_bytes == 0));
            CHECK(offload < OFFLOAD_ALL || (dm.params_bytes == 0 && dm.host_params_bytes > 0));
        }
        CHECK_OK(shardopt_optimizer_step_count(dev, &steps));
        CHECK(steps == 3);
        CHECK_OK(shardopt_optimizer_synchronize_state(dev));
        CHECK_OK(shardopt_optimizer_should_early_stop(dev, 1, &stop));
        CHECK(stop == 1);
    }
    CHECK_OK(shardopt_optimizer_destroy(dev));
    CHECK_OK(shardopt_optimizer_destroy(host));
}

/* loss = 0.5 * |p - target|^2, target[i] = i / 4 - 1: host memory in the callback. */
static int bowl_model(void *user_data, const void *params, void *grad, const int64_t *samples, size_t sample_count,
                      double *loss) {
    const float *p = (const float *)params;
    float *g = (float *)grad;
    double l = 0;
    int i;
    (void)user_data;
    (void)samples;
    (void)sample_count;
    for (i = 0; i < N; ++i) {
        const double d = p[i] - (i / 4.0 - 1.0);
        g[i] = (float)d;
        l += 0.5 * d * d;
    }
    *loss = l;
    return 0;
}

/* optimize() and checkpoints: host memory at the boundary, the same files as host memory's. */
static void optimize_and_checkpoints(shardopt_comm gpu, shardopt_comm host_comm) {
    shardopt_optimizer dev = make(gpu, SHARDOPT_MEMORY_CUDA, SHARDOPT_ZERO1, SHARDOPT_ADAM);
    shardopt_optimizer host = make(host_comm, SHARDOPT_MEMORY_HOST, SHARDOPT_ZERO1, SHARDOPT_ADAM);
    shardopt_optimizer restored = make(host_comm, SHARDOPT_MEMORY_HOST, SHARDOPT_DDP, SHARDOPT_ADAM);
    shardopt_optimizer dev2 = make(gpu, SHARDOPT_MEMORY_CUDA, SHARDOPT_DDP, SHARDOPT_ADAM);
    shardopt_optimize_options oo;
    shardopt_optimize_result dr = {.struct_size = sizeof dr}, hr = {.struct_size = sizeof hr};
    float dbest[N], hbest[N], a[N], b[N];
    double dhist[4], hhist[4];
    void *bytes = NULL;
    size_t size = 0;
    CHECK_OK(shardopt_optimize_options_init(&oo));
    oo.num_samples = 16;
    oo.batch_size = 8;
    oo.epochs = 4;
    dr.best_parameters = dbest;
    hr.best_parameters = hbest;
    dr.best_parameters_count = hr.best_parameters_count = N;
    dr.loss_history = dhist;
    hr.loss_history = hhist;
    dr.loss_history_capacity = hr.loss_history_capacity = 4;
    CHECK_OK(shardopt_optimizer_optimize(dev, bowl_model, NULL, &oo, &dr));
    CHECK_OK(shardopt_optimizer_optimize(host, bowl_model, NULL, &oo, &hr));
    CHECK(dr.loss_history_count == 4 && dr.iterations == hr.iterations && dhist[3] < dhist[0]);
    CHECK(close_all(dbest, hbest, N, 1e-5f) && fabs(dhist[3] - hhist[3]) <= 1e-5 * (1 + hhist[3]));

    /* CUDA-memory bytes into a host-memory optimizer of another strategy, and back */
    CHECK_OK(shardopt_optimizer_serialize(dev, &bytes, &size));
    CHECK(size > 0);
    CHECK_OK(shardopt_optimizer_deserialize(restored, bytes, size));
    CHECK_OK(shardopt_optimizer_get_parameters(dev, a, N));
    CHECK_OK(shardopt_optimizer_get_parameters(restored, b, N));
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK_OK(shardopt_buffer_free(bytes));
    bytes = NULL;
    CHECK_OK(shardopt_optimizer_serialize(host, &bytes, &size));
    CHECK_OK(shardopt_optimizer_deserialize(dev2, bytes, size));
    CHECK_OK(shardopt_optimizer_get_parameters(host, a, N));
    CHECK_OK(shardopt_optimizer_get_parameters(dev2, b, N));
    CHECK(memcmp(a, b, sizeof a) == 0);
    /* a bad checkpoint changes nothing */
    ((unsigned char *)bytes)[0] ^= 0xff;
    CHECK_ERR(shardopt_optimizer_deserialize(dev2, bytes, size), SHARDOPT_ERR_CORRUPT, "magic");
    CHECK_OK(shardopt_optimizer_get_parameters(dev2, b, N));
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK_OK(shardopt_buffer_free(bytes));
    CHECK_OK(shardopt_optimizer_destroy(dev));
    CHECK_OK(shardopt_optimizer_destroy(dev2));
    CHECK_OK(shardopt_optimizer_destroy(host));
    CHECK_OK(shardopt_optimizer_destroy(restored));
}

/* train() with the model on the device (device_batches) against the same training with host
 * copies: sample s pulls the parameters towards target_s[i] = (s % 5 - 2) / 4 + i / 8. */
struct device_model {
    int on_device, device, calls, wrong; /* what the batches should say; model calls; batches that did not */
};
static int sample_model(void *user_data, const shardopt_batch *b, double *loss) {
    struct device_model *m = (struct device_model *)user_data;
    float p[N], g[N] = {0};
    double l = 0;
    size_t k;
    int i;
    ++m->calls;
    if (b->on_device != m->on_device || b->device != m->device || b->cuda_stream != NULL ||
        test_cuda_is_device(b->params) != m->on_device || (b->grad && test_cuda_is_device(b->grad) != m->on_device))
        ++m->wrong;
    if (m->on_device) {
        if (test_cuda_copy(p, b->params, sizeof p) != 0) return 2;
    } else {
        memcpy(p, b->params, sizeof p);
    }
    for (k = 0; k < b->sample_count; ++k)
        for (i = 0; i < N; ++i) {
            const double d = p[i] - ((double)(b->samples[k] % 5 - 2) / 4.0 + i / 8.0);
            g[i] += (float)(d / (double)b->sample_count);
            l += 0.5 * d * d / (double)b->sample_count;
        }
    *loss = l;
    if (!b->grad) return 0;
    if (m->on_device) return test_cuda_copy(b->grad, g, sizeof g) == 0 ? 0 : 2;
    memcpy(b->grad, g, sizeof g);
    return 0;
}

static void device_batches(shardopt_comm gpu, shardopt_strategy strategy) {
    float best[2][N];
    double train_h[2][6], valid_h[2][6];
    shardopt_training_result r[2];
    int mode, device = -1;
    CHECK_OK(shardopt_comm_device(gpu, &device));
    for (mode = 0; mode < 2; ++mode) {
        shardopt_optimizer opt = make(gpu, SHARDOPT_MEMORY_CUDA, strategy, SHARDOPT_ADAM);
        struct device_model m = {mode, mode ? device : -1, 0, 0};
        shardopt_training_options t;
        CHECK_OK(shardopt_training_options_init(&t));
        CHECK(t.device_batches == 0); /* the default: host copies */
        t.num_samples = 20;
        t.num_validation_samples = 7;
        t.num_test_samples = 5;
        t.batch_size = 6;
        t.max_epochs = 6;
        t.seed = 3;
        t.device_batches = mode;
        memset(&r[mode], 0, sizeof r[mode]);
        r[mode].struct_size = sizeof r[mode];
        r[mode].best_parameters = best[mode];
        r[mode].best_parameters_count = N;
        r[mode].training_loss_history = train_h[mode];
        r[mode].validation_loss_history = valid_h[mode];
        r[mode].history_capacity = 6;
        CHECK_OK(shardopt_optimizer_train(opt, sample_model, &m, &t, &r[mode]));
        CHECK(m.calls > 0 && m.wrong == 0);
        CHECK_OK(shardopt_optimizer_destroy(opt));
    }
    CHECK(r[1].epochs == r[0].epochs && r[1].steps == r[0].steps && r[1].best_epoch == r[0].best_epoch);
    CHECK(close_all(best[1], best[0], N, 1e-6f));
    CHECK(fabs(r[1].test_loss - r[0].test_loss) <= 1e-6 * (1 + r[0].test_loss));
    CHECK(fabs(valid_h[1][r[1].epochs - 1] - valid_h[0][r[0].epochs - 1]) <= 1e-6 * (1 + valid_h[0][0]));
    CHECK(valid_h[1][r[1].epochs - 1] < valid_h[1][0]); /* it trained */
}

/* device_batches with an optimizer in host memory: refused, naming the option. */
static void device_batches_on_host(void) {
    shardopt_comm comm = NULL;
    shardopt_optimizer opt;
    shardopt_training_options t;
    struct device_model m = {1, 0, 0, 0};
    CHECK_OK(shardopt_comm_create_inprocess(1, &comm));
    opt = make(comm, SHARDOPT_MEMORY_HOST, SHARDOPT_DDP, SHARDOPT_ADAM);
    CHECK_OK(shardopt_training_options_init(&t));
    t.num_samples = 4;
    t.device_batches = 1;
    CHECK_ERR(shardopt_optimizer_train(opt, sample_model, &m, &t, NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "device_batches");
    CHECK(m.calls == 0);
    t.device_batches = 2;
    CHECK_ERR(shardopt_training_options_validate(&t), SHARDOPT_ERR_INVALID_ARGUMENT, "device_batches");
    CHECK_OK(shardopt_optimizer_destroy(opt));
    CHECK_OK(shardopt_comm_destroy(comm));
}

/* What CUDA memory does not support: UNSUPPORTED, nothing created. */
static void unsupported(shardopt_comm gpu, int world) {
    shardopt_params p = NULL;
    shardopt_optimizer_options o;
    shardopt_sharding_options s;
    shardopt_optimizer sentinel = (shardopt_optimizer)&sentinel, opt = sentinel;
    CHECK_OK(shardopt_params_create(SHARDOPT_F64, 0, &p));
    CHECK_OK(shardopt_params_add(p, "w", 4, 0, NULL));
    CHECK_OK(shardopt_optimizer_options_init(&o));
    CHECK_OK(shardopt_sharding_options_init(&s));
    s.memory = SHARDOPT_MEMORY_CUDA;
    CHECK_ERR(shardopt_optimizer_create(gpu, p, &o, &s, NULL, &opt), SHARDOPT_ERR_UNSUPPORTED, "f32");
    CHECK_OK(shardopt_params_destroy(p));
    p = make_params_a6_b3();
    CHECK_OK(shardopt_optimizer_options_defaults(SHARDOPT_LAMB, &o));
    s.strategy = SHARDOPT_ZERO2;
    if (world > 1) {
        CHECK_ERR(shardopt_optimizer_create(gpu, p, &o, &s, NULL, &opt), SHARDOPT_ERR_UNSUPPORTED, "LAMB");
    } else { /* one rank: nothing is split */
        CHECK_OK(shardopt_optimizer_create(gpu, p, &o, &s, NULL, &opt));
        CHECK_OK(shardopt_optimizer_destroy(opt));
    }
    s.strategy = SHARDOPT_DDP; /* whole tensors: fine */
    CHECK_OK(shardopt_optimizer_create(gpu, p, &o, &s, NULL, &opt));
    CHECK_OK(shardopt_optimizer_destroy(opt));
    CHECK_OK(shardopt_params_destroy(p));
}

int test_gpu_device_memory(const char *backend) {
    shardopt_comm gpu = NULL, host_comm = NULL;
    static const shardopt_strategy strategies[] = {SHARDOPT_DDP, SHARDOPT_ZERO1, SHARDOPT_ZERO2, SHARDOPT_FSDP,
                                                   SHARDOPT_LOCAL_SGD};
    size_t i;
    int world = 0, rank = -1;
    if (shardopt_comm_create(backend, -1, -1, -1, &gpu) != SHARDOPT_OK) return 0; /* test_gpu_backends said why */
    CHECK_OK(shardopt_comm_size(gpu, &world));
    CHECK_OK(shardopt_comm_rank(gpu, &rank));
    CHECK_OK(shardopt_comm_set_timeout(gpu, 60000));
    printf("test_gpu: rank %d of %d: the optimizer in CUDA memory on backend '%s'\n", rank, world, backend);
    CHECK_OK(shardopt_comm_create_inprocess(1, &host_comm)); /* the reference: host memory, one rank */
    { /* the optimizer's device is its communicator's; its stream the options' */
        int comm_device = -2, device = -2;
        shardopt_memory_space memory = SHARDOPT_MEMORY_HOST;
        void *stream = &device;
        shardopt_optimizer opt = make(gpu, SHARDOPT_MEMORY_CUDA, SHARDOPT_DDP, SHARDOPT_ADAM);
        CHECK_OK(shardopt_comm_device(gpu, &comm_device));
        CHECK_OK(shardopt_optimizer_device(opt, &memory, &device, &stream));
        CHECK(comm_device >= 0 && device == comm_device && memory == SHARDOPT_MEMORY_CUDA && stream == NULL);
        CHECK_OK(shardopt_optimizer_order_stream(opt, NULL)); /* the legacy stream after the compute stream (itself) */
        CHECK_OK(shardopt_optimizer_destroy(opt));
    }
    for (i = 0; i < sizeof strategies / sizeof strategies[0]; ++i)
        step_protocol(gpu, host_comm, strategies[i], world, OFFLOAD_NONE);
    /* ZeRO-Offload: the same steps with the update on the CPU */
    step_protocol(gpu, host_comm, SHARDOPT_DDP, world, OFFLOAD_OPTIMIZER);
    step_protocol(gpu, host_comm, SHARDOPT_ZERO2, world, OFFLOAD_GRADIENTS);
    step_protocol(gpu, host_comm, SHARDOPT_FSDP, world, OFFLOAD_ALL);
    optimize_and_checkpoints(gpu, host_comm);
    if (test_cuda_copy(&rank, &rank, sizeof rank) == 0) { /* a CUDA runtime to move the model's batches */
        device_batches(gpu, SHARDOPT_DDP);
        device_batches(gpu, SHARDOPT_ZERO2);
        device_batches(gpu, SHARDOPT_FSDP);
    }
    unsupported(gpu, world);
    CHECK_OK(shardopt_comm_destroy(host_comm));
    CHECK_OK(shardopt_comm_destroy(gpu));
    return 1;
}

void test_gpu(void) {
    test_gpu_backends();
    test_comm_create_args();
    test_no_device();
    device_batches_on_host();
    unsetenv("SHARDOPT_WORLD_SIZE"); /* a world of one */
    if (!test_gpu_device_memory("nccl")) test_gpu_device_memory("staged");
}

/* The GPU entry points of the ABI on any machine. On a host without a usable GPU (or a build
 * without CUDA, or without NCCL) the GPU backends fail cleanly: UNSUPPORTED, nothing written,
 * and a message that says why; with a GPU they succeed and are used a little. The device
 * optimizer's failures that need no GPU: a communicator without a device, argument checks,
 * NULL handles with every output left unchanged, a handle of the wrong kind, destroy(NULL). */
#include <stdlib.h>

#include "harness.h"
#include "tests.h"

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

/* A communicator that is not a GPU one: no device optimizer, no CUDA stream. */
static void no_device(shardopt_comm comm, const char *backend) {
    shardopt_params p = make_params_a6_b3();
    shardopt_optimizer_options o;
    shardopt_sharding_options s;
    shardopt_device_optimizer sentinel = (shardopt_device_optimizer)&sentinel, opt = sentinel;
    float init[9] = {0};
    int stream_storage = 0;
    char why[96];
    CHECK_OK(shardopt_optimizer_options_init(&o));
    CHECK_OK(shardopt_sharding_options_init(&s));
#ifdef SHARDOPT_TEST_HAVE_CUDA
    snprintf(why, sizeof why, "communicator of backend '%s' has no device", backend);
    CHECK_ERR(shardopt_device_optimizer_create(comm, p, &o, &s, NULL, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT, why);
    CHECK_ERR(shardopt_device_optimizer_create(comm, p, &o, &s, init, &stream_storage, &opt),
              SHARDOPT_ERR_INVALID_ARGUMENT, why);
#else
    CHECK_ERR(shardopt_device_optimizer_create(comm, p, &o, &s, NULL, NULL, &opt), SHARDOPT_ERR_UNSUPPORTED,
              "built without CUDA");
    CHECK_ERR(shardopt_device_optimizer_create(comm, p, &o, &s, init, &stream_storage, &opt),
              SHARDOPT_ERR_UNSUPPORTED, "built without CUDA");
    snprintf(why, sizeof why, "communicator of backend '%s' has no device", backend);
#endif
    CHECK(opt == sentinel);
    CHECK_ERR(shardopt_comm_set_cuda_stream(comm, &stream_storage), SHARDOPT_ERR_INVALID_ARGUMENT, why);
    CHECK_ERR(shardopt_comm_set_cuda_stream(comm, NULL), SHARDOPT_ERR_INVALID_ARGUMENT, why);
    CHECK_OK(shardopt_params_destroy(p));
}

/* The argument checks before anything is built are the host optimizer's. */
static void creation_errors(shardopt_comm comm) {
    shardopt_params p = make_params_a6_b3(), empty = NULL;
    shardopt_optimizer_options o;
    shardopt_sharding_options s;
    shardopt_device_optimizer sentinel = (shardopt_device_optimizer)&sentinel, opt = sentinel;
    CHECK_OK(shardopt_optimizer_options_init(&o));
    CHECK_OK(shardopt_sharding_options_init(&s));
    CHECK_ERR(shardopt_device_optimizer_create(NULL, p, &o, &s, NULL, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT,
              "communicator handle is NULL");
    CHECK_ERR(shardopt_device_optimizer_create(comm, NULL, &o, &s, NULL, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT,
              "parameter set handle is NULL");
    CHECK_ERR(shardopt_device_optimizer_create(comm, p, NULL, &s, NULL, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT,
              "optimizer options is NULL");
    CHECK_ERR(shardopt_device_optimizer_create(comm, p, &o, NULL, NULL, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT,
              "sharding options is NULL");
    CHECK_ERR(shardopt_device_optimizer_create(comm, p, &o, &s, NULL, NULL, NULL), SHARDOPT_ERR_INVALID_ARGUMENT,
              "out is NULL");
    o.lr = -1.0;
    CHECK_ERR(shardopt_device_optimizer_create(comm, p, &o, &s, NULL, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT,
              "lr");
    CHECK_OK(shardopt_optimizer_options_init(&o));
    s.strategy = (shardopt_strategy)42;
    CHECK_ERR(shardopt_device_optimizer_create(comm, p, &o, &s, NULL, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT,
              "invalid strategy 42");
    CHECK_OK(shardopt_sharding_options_init(&s));
    CHECK_OK(shardopt_params_create(SHARDOPT_F32, 0, &empty));
    CHECK_ERR(shardopt_device_optimizer_create(comm, empty, &o, &s, NULL, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT,
              "no tensors");
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
    unsetenv("SHARDOPT_WORLD_SIZE");
    c = NULL;
    CHECK_OK(shardopt_comm_create_from_env("ucx", &c));
    no_device(c, "ucx");
    CHECK_OK(shardopt_comm_destroy(c));
#endif
}

#define NULL_HANDLE(expr) CHECK_ERR(expr, SHARDOPT_ERR_INVALID_ARGUMENT, "device optimizer handle is NULL")

/* Every function on a NULL handle: INVALID_ARGUMENT, and no output written. */
static void test_null_handles(void) {
    int i = -7;
    size_t n = 77;
    int64_t i64 = -77;
    float f[9] = {0};
    char dir[] = "/nonexistent/never-written";
    void *sentinel = &i, *p = sentinel;
    shardopt_step_result sr;
    shardopt_memory_stats ms;
    shardopt_optimize_options oo;
    memset(&sr, 0xab, sizeof sr);
    memset(&ms, 0xab, sizeof ms);
    sr.struct_size = sizeof sr;
    ms.struct_size = sizeof ms;
    CHECK_OK(shardopt_optimize_options_init(&oo));

    CHECK_OK(shardopt_device_optimizer_destroy(NULL));
    CHECK_ERR(shardopt_comm_set_cuda_stream(NULL, NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "communicator handle is NULL");
    NULL_HANDLE(shardopt_device_optimizer_tensor_count(NULL, &i));
    NULL_HANDLE(shardopt_device_optimizer_tensor_info(NULL, 0, &n, &i));
    NULL_HANDLE(shardopt_device_optimizer_bucket_count(NULL, &i));
    NULL_HANDLE(shardopt_device_optimizer_bucket_info(NULL, 0, &n));
    NULL_HANDLE(shardopt_device_optimizer_element_count(NULL, &n, &n));
    NULL_HANDLE(shardopt_device_optimizer_set_learning_rate(NULL, 0.1));
    NULL_HANDLE(shardopt_device_optimizer_step_count(NULL, &i64));
    NULL_HANDLE(shardopt_device_optimizer_parameters(NULL, &p));
    NULL_HANDLE(shardopt_device_optimizer_tensor_parameters(NULL, 0, &p));
    NULL_HANDLE(shardopt_device_optimizer_get_parameters(NULL, f, 9));
    NULL_HANDLE(shardopt_device_optimizer_set_parameters(NULL, f, 9));
    NULL_HANDLE(shardopt_device_optimizer_gather(NULL, 0, &p));
    NULL_HANDLE(shardopt_device_optimizer_release(NULL, 0));
    NULL_HANDLE(shardopt_device_optimizer_zero_grad(NULL));
    NULL_HANDLE(shardopt_device_optimizer_bucket_grad(NULL, 0, &p, &n));
    NULL_HANDLE(shardopt_device_optimizer_tensor_grad(NULL, 0, &p, &n));
    NULL_HANDLE(shardopt_device_optimizer_grad_ready(NULL, 0));
    NULL_HANDLE(shardopt_device_optimizer_step(NULL, &sr));
    NULL_HANDLE(shardopt_device_optimizer_synchronize_state(NULL));
    NULL_HANDLE(shardopt_device_optimizer_should_early_stop(NULL, 1, &i));
    NULL_HANDLE(shardopt_device_optimizer_memory_stats(NULL, &ms));
    NULL_HANDLE(shardopt_device_optimizer_optimize(NULL, NULL, NULL, &oo, NULL));
    NULL_HANDLE(shardopt_device_optimizer_save(NULL, dir, SHARDOPT_CHECKPOINT_SHARDED));
    NULL_HANDLE(shardopt_device_optimizer_load(NULL, dir));
    NULL_HANDLE(shardopt_device_optimizer_serialize(NULL, &p, &n));
    NULL_HANDLE(shardopt_device_optimizer_deserialize(NULL, f, sizeof f));
    /* NULL handle and NULL outputs: the handle is reported */
    NULL_HANDLE(shardopt_device_optimizer_tensor_count(NULL, NULL));
    NULL_HANDLE(shardopt_device_optimizer_parameters(NULL, NULL));
    NULL_HANDLE(shardopt_device_optimizer_bucket_grad(NULL, 0, NULL, NULL));
    NULL_HANDLE(shardopt_device_optimizer_serialize(NULL, NULL, NULL));
    CHECK(i == -7 && n == 77 && i64 == -77 && p == sentinel);
    {
        unsigned char pattern[sizeof sr > sizeof ms ? sizeof sr : sizeof ms];
        memset(pattern, 0xab, sizeof pattern);
        CHECK(sr.struct_size == sizeof sr && memcmp((char *)&sr + sizeof sr.struct_size, pattern,
                                                    sizeof sr - sizeof sr.struct_size) == 0);
        CHECK(ms.struct_size == sizeof ms && memcmp((char *)&ms + sizeof ms.struct_size, pattern,
                                                    sizeof ms - sizeof ms.struct_size) == 0);
    }
}

/* A live handle of another kind is refused by its tag, not misused. */
static void test_wrong_kind(void) {
    shardopt_comm c = NULL;
    shardopt_params p = make_params_a6_b3();
    shardopt_optimizer_options o;
    shardopt_sharding_options s;
    shardopt_optimizer host = NULL;
    int count = -7;
    CHECK_OK(shardopt_comm_create_inprocess(1, &c));
    CHECK_OK(shardopt_optimizer_options_init(&o));
    CHECK_OK(shardopt_sharding_options_init(&s));
    CHECK_OK(shardopt_optimizer_create(c, p, &o, &s, NULL, &host));
    CHECK_ERR(shardopt_device_optimizer_tensor_count((shardopt_device_optimizer)(void *)host, &count),
              SHARDOPT_ERR_INVALID_ARGUMENT, "device optimizer handle is invalid");
    CHECK_ERR(shardopt_device_optimizer_destroy((shardopt_device_optimizer)(void *)host),
              SHARDOPT_ERR_INVALID_ARGUMENT, "device optimizer handle is invalid");
    CHECK(count == -7);
    CHECK_OK(shardopt_optimizer_tensor_count(host, &count)); /* still alive */
    CHECK(count == 2);
    CHECK_OK(shardopt_optimizer_destroy(host));
    CHECK_OK(shardopt_params_destroy(p));
    CHECK_OK(shardopt_comm_destroy(c));
}

void test_gpu(void) {
    test_gpu_backends();
    test_no_device();
    test_null_handles();
    test_wrong_kind();
}

/* Version, status names, destroy(NULL), NULL handles on every handle-taking function, and
 * communicators from the environment. */
#include <stdlib.h>

#include "harness.h"
#include "tests.h"

static void test_version(void) {
    CHECK(shardopt_version() == SHARDOPT_VERSION_NUMBER);
    CHECK(shardopt_abi_version() == SHARDOPT_ABI_VERSION);
    CHECK(strcmp(shardopt_status_name(SHARDOPT_OK), "SHARDOPT_OK") == 0);
    CHECK(strcmp(shardopt_status_name(SHARDOPT_ERR_TIMEOUT), "SHARDOPT_ERR_TIMEOUT") == 0);
    CHECK(strcmp(shardopt_status_name(SHARDOPT_ERR_INTERNAL), "SHARDOPT_ERR_INTERNAL") == 0);
    CHECK(strcmp(shardopt_status_name((shardopt_status)77), "SHARDOPT_ERR_UNKNOWN") == 0);
}

static void test_destroy_null(void) {
    CHECK_OK(shardopt_comm_destroy(NULL));
    CHECK_OK(shardopt_work_destroy(NULL));
    CHECK_OK(shardopt_params_destroy(NULL));
    CHECK_OK(shardopt_optimizer_destroy(NULL));
}

#define NULL_HANDLE(expr) CHECK_ERR(expr, SHARDOPT_ERR_INVALID_ARGUMENT, "handle is NULL")

static void test_null_handles(void) {
    int i = 0;
    size_t n = 0;
    int64_t i64 = 0;
    float f[4] = {0};
    void *p = NULL;
    shardopt_comm c = NULL;
    shardopt_work w = NULL;
    shardopt_optimizer o = NULL;
    shardopt_step_result sr;
    shardopt_memory_stats ms;
    shardopt_optimize_options oo;
    shardopt_optimizer_options opt;
    shardopt_sharding_options so;
    shardopt_params ps = NULL;
    sr.struct_size = sizeof sr;
    ms.struct_size = sizeof ms;
    CHECK_OK(shardopt_optimize_options_init(&oo));
    CHECK_OK(shardopt_optimizer_options_init(&opt));
    CHECK_OK(shardopt_sharding_options_init(&so));

    NULL_HANDLE(shardopt_comm_split(NULL, 0, 0, &c));
    NULL_HANDLE(shardopt_comm_rank(NULL, &i));
    NULL_HANDLE(shardopt_comm_size(NULL, &i));
    NULL_HANDLE(shardopt_comm_set_timeout(NULL, 1000));
    NULL_HANDLE(shardopt_comm_abort(NULL, "x"));
    NULL_HANDLE(shardopt_allreduce(NULL, f, f, 4, SHARDOPT_F32, SHARDOPT_SUM));
    NULL_HANDLE(shardopt_reduce_scatter(NULL, f, f, 1, SHARDOPT_F32, SHARDOPT_SUM));
    NULL_HANDLE(shardopt_allgather(NULL, f, f, 1, SHARDOPT_F32));
    NULL_HANDLE(shardopt_broadcast(NULL, f, 4, SHARDOPT_F32, 0));
    NULL_HANDLE(shardopt_reduce(NULL, f, f, 4, SHARDOPT_F32, SHARDOPT_SUM, 0));
    NULL_HANDLE(shardopt_barrier(NULL));
    NULL_HANDLE(shardopt_send(NULL, f, 4, SHARDOPT_F32, 0, 0));
    NULL_HANDLE(shardopt_recv(NULL, f, 4, SHARDOPT_F32, 0, 0));
    NULL_HANDLE(shardopt_allreduce_async(NULL, f, f, 4, SHARDOPT_F32, SHARDOPT_SUM, &w));
    NULL_HANDLE(shardopt_reduce_scatter_async(NULL, f, f, 1, SHARDOPT_F32, SHARDOPT_SUM, &w));
    NULL_HANDLE(shardopt_allgather_async(NULL, f, f, 1, SHARDOPT_F32, &w));
    NULL_HANDLE(shardopt_broadcast_async(NULL, f, 4, SHARDOPT_F32, 0, &w));
    NULL_HANDLE(shardopt_reduce_async(NULL, f, f, 4, SHARDOPT_F32, SHARDOPT_SUM, 0, &w));
    NULL_HANDLE(shardopt_barrier_async(NULL, &w));
    NULL_HANDLE(shardopt_send_async(NULL, f, 4, SHARDOPT_F32, 0, 0, &w));
    NULL_HANDLE(shardopt_recv_async(NULL, f, 4, SHARDOPT_F32, 0, 0, &w));
    NULL_HANDLE(shardopt_work_wait(NULL));
    NULL_HANDLE(shardopt_work_test(NULL, &i));
    NULL_HANDLE(shardopt_params_add(NULL, "w", 4, 0, &i));
    NULL_HANDLE(shardopt_params_end_bucket(NULL));
    NULL_HANDLE(shardopt_params_tensor_count(NULL, &i));
    NULL_HANDLE(shardopt_params_element_count(NULL, &n));
    NULL_HANDLE(shardopt_params_padded_count(NULL, 2, &n));
    NULL_HANDLE(shardopt_optimizer_create(NULL, ps, &opt, &so, NULL, &o));
    NULL_HANDLE(shardopt_optimizer_create_external(NULL, ps, &opt, &so, NULL, f, 4, &o));
    NULL_HANDLE(shardopt_optimizer_tensor_count(NULL, &i));
    NULL_HANDLE(shardopt_optimizer_tensor_info(NULL, 0, &n, &i));
    NULL_HANDLE(shardopt_optimizer_bucket_count(NULL, &i));
    NULL_HANDLE(shardopt_optimizer_bucket_info(NULL, 0, &n));
    NULL_HANDLE(shardopt_optimizer_element_count(NULL, &n, &n));
    NULL_HANDLE(shardopt_optimizer_set_learning_rate(NULL, 0.1));
    NULL_HANDLE(shardopt_optimizer_follow_options(NULL, &opt));
    NULL_HANDLE(shardopt_optimizer_check_array(NULL, "out", SHARDOPT_F32, 4));
    NULL_HANDLE(shardopt_params_check_array(NULL, "initial", SHARDOPT_F32, 4, 0));
    NULL_HANDLE(shardopt_optimizer_step_count(NULL, &i64));
    NULL_HANDLE(shardopt_optimizer_parameters(NULL, &p));
    NULL_HANDLE(shardopt_optimizer_tensor_parameters(NULL, 0, &p));
    NULL_HANDLE(shardopt_optimizer_get_parameters(NULL, f, 4));
    NULL_HANDLE(shardopt_optimizer_set_parameters(NULL, f, 4));
    NULL_HANDLE(shardopt_optimizer_gather(NULL, 0, &p));
    NULL_HANDLE(shardopt_optimizer_release(NULL, 0));
    NULL_HANDLE(shardopt_optimizer_zero_grad(NULL));
    NULL_HANDLE(shardopt_optimizer_bucket_grad(NULL, 0, &p, &n));
    NULL_HANDLE(shardopt_optimizer_tensor_grad(NULL, 0, &p, &n));
    NULL_HANDLE(shardopt_optimizer_grad_ready(NULL, 0));
    NULL_HANDLE(shardopt_optimizer_step(NULL, &sr));
    NULL_HANDLE(shardopt_optimizer_synchronize_state(NULL));
    NULL_HANDLE(shardopt_optimizer_should_early_stop(NULL, 0, &i));
    NULL_HANDLE(shardopt_optimizer_memory_stats(NULL, &ms));
    NULL_HANDLE(shardopt_optimizer_optimize(NULL, NULL, NULL, &oo, NULL));
    CHECK(w == NULL && o == NULL && c == NULL);
}

/* Every optimizer function on a NULL handle: INVALID_ARGUMENT naming the handle, and no output
 * written (outputs hold sentinels before; struct outputs a byte pattern). */
static void test_null_handles_leave_outputs(void) {
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
#define OPT_NULL(expr) CHECK_ERR(expr, SHARDOPT_ERR_INVALID_ARGUMENT, "optimizer handle is NULL")
    OPT_NULL(shardopt_optimizer_tensor_count(NULL, &i));
    OPT_NULL(shardopt_optimizer_tensor_info(NULL, 0, &n, &i));
    OPT_NULL(shardopt_optimizer_bucket_count(NULL, &i));
    OPT_NULL(shardopt_optimizer_bucket_info(NULL, 0, &n));
    OPT_NULL(shardopt_optimizer_element_count(NULL, &n, &n));
    OPT_NULL(shardopt_optimizer_step_count(NULL, &i64));
    OPT_NULL(shardopt_optimizer_parameters(NULL, &p));
    OPT_NULL(shardopt_optimizer_tensor_parameters(NULL, 0, &p));
    OPT_NULL(shardopt_optimizer_get_parameters(NULL, f, 9));
    OPT_NULL(shardopt_optimizer_gather(NULL, 0, &p));
    OPT_NULL(shardopt_optimizer_bucket_grad(NULL, 0, &p, &n));
    OPT_NULL(shardopt_optimizer_tensor_grad(NULL, 0, &p, &n));
    OPT_NULL(shardopt_optimizer_step(NULL, &sr));
    OPT_NULL(shardopt_optimizer_should_early_stop(NULL, 1, &i));
    OPT_NULL(shardopt_optimizer_memory_stats(NULL, &ms));
    OPT_NULL(shardopt_optimizer_save(NULL, dir, SHARDOPT_CHECKPOINT_SHARDED));
    OPT_NULL(shardopt_optimizer_load(NULL, dir));
    OPT_NULL(shardopt_optimizer_serialize(NULL, &p, &n));
    OPT_NULL(shardopt_optimizer_deserialize(NULL, f, sizeof f));
    /* NULL handle and NULL outputs: the handle is reported */
    OPT_NULL(shardopt_optimizer_tensor_count(NULL, NULL));
    OPT_NULL(shardopt_optimizer_parameters(NULL, NULL));
    OPT_NULL(shardopt_optimizer_bucket_grad(NULL, 0, NULL, NULL));
    OPT_NULL(shardopt_optimizer_serialize(NULL, NULL, NULL));
#undef OPT_NULL
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
    int count = -7;
    CHECK_OK(shardopt_comm_create_inprocess(1, &c));
    CHECK_ERR(shardopt_optimizer_tensor_count((shardopt_optimizer)(void *)c, &count), SHARDOPT_ERR_INVALID_ARGUMENT,
              "optimizer handle is invalid");
    CHECK_ERR(shardopt_optimizer_destroy((shardopt_optimizer)(void *)p), SHARDOPT_ERR_INVALID_ARGUMENT,
              "optimizer handle is invalid");
    CHECK_ERR(shardopt_comm_rank((shardopt_comm)(void *)p, &count), SHARDOPT_ERR_INVALID_ARGUMENT,
              "communicator handle is invalid");
    CHECK(count == -7);
    CHECK_OK(shardopt_params_tensor_count(p, &count)); /* both still alive */
    CHECK(count == 2);
    CHECK_OK(shardopt_comm_destroy(c));
    CHECK_OK(shardopt_params_destroy(p));
}

static void test_env(void) {
    shardopt_comm c = NULL;
    int rank = -1, size = -1;
    unsetenv("SHARDOPT_BACKEND");
    unsetenv("SHARDOPT_WORLD_SIZE");
    CHECK_ERR(shardopt_comm_create_from_env("inprocess", NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "comm is NULL");
    CHECK_OK(shardopt_comm_create_from_env("inprocess", &c));
    CHECK_OK(shardopt_comm_rank(c, &rank));
    CHECK_OK(shardopt_comm_size(c, &size));
    CHECK(rank == 0 && size == 1);
    CHECK_OK(shardopt_comm_destroy(c));
    c = NULL;
    CHECK_OK(shardopt_comm_create_from_env(NULL, &c)); /* default: inprocess */
    CHECK(c != NULL);
    CHECK_OK(shardopt_comm_destroy(c));
    c = NULL;
#ifdef SHARDOPT_TEST_HAVE_UCX
    /* No launcher environment: refused (each process would be rank 0 of 1, unnoticed)... */
    CHECK_ERR(shardopt_comm_create_from_env("ucx", &c), SHARDOPT_ERR_INVALID_ARGUMENT, "no world size");
    CHECK(c == NULL);
    /* ...unless a world of one is asked for. */
    setenv("SHARDOPT_WORLD_SIZE", "1", 1);
    CHECK_OK(shardopt_comm_create_from_env("ucx", &c));
    unsetenv("SHARDOPT_WORLD_SIZE");
    CHECK_OK(shardopt_comm_size(c, &size));
    CHECK(size == 1);
    CHECK_OK(shardopt_comm_destroy(c));
    c = NULL;
#else
    CHECK_ERR(shardopt_comm_create_from_env("ucx", &c), SHARDOPT_ERR_UNSUPPORTED, "ucx backend is not built");
    setenv("SHARDOPT_BACKEND", "ucx", 1);
    CHECK_ERR(shardopt_comm_create_from_env(NULL, &c), SHARDOPT_ERR_UNSUPPORTED, "ucx");
    unsetenv("SHARDOPT_BACKEND");
#endif
    CHECK_ERR(shardopt_comm_create_from_env("carrier-pigeon", &c), SHARDOPT_ERR_INVALID_ARGUMENT,
              "unknown backend 'carrier-pigeon'");
    setenv("SHARDOPT_WORLD_SIZE", "4", 1);
    CHECK_ERR(shardopt_comm_create_from_env("inprocess", &c), SHARDOPT_ERR_INVALID_ARGUMENT, "SHARDOPT_WORLD_SIZE=4");
    unsetenv("SHARDOPT_WORLD_SIZE");
    CHECK(c == NULL);

    CHECK_ERR(shardopt_comm_create_inprocess(0, &c), SHARDOPT_ERR_INVALID_ARGUMENT, "size must be >= 1");
    CHECK_ERR(shardopt_comm_create_inprocess(2, NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "comms is NULL");
}

/* The last error is per thread: a failure on another thread does not change ours. */
static void *fail_on_other_thread(void *arg) {
    (void)arg;
    shardopt_comm_rank(NULL, NULL);
    return NULL;
}

static void test_thread_local_error(void) {
    pthread_t t;
    shardopt_barrier(NULL);
    pthread_create(&t, NULL, fail_on_other_thread, NULL);
    pthread_join(t, NULL);
    CHECK(strstr(shardopt_last_error_message(), "shardopt_barrier") != NULL);
}

void test_basics(void) {
    test_version();
    test_destroy_null();
    test_null_handles();
    test_null_handles_leave_outputs();
    test_wrong_kind();
    test_env();
    test_thread_local_error();
}

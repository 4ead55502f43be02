/* Sharded optimizers on 2 ranks: creation errors (invalid options name the field), the step
 * protocol, layout queries, parameters, FSDP gather/release states, caller-owned parameters,
 * state synchronization, early-stop vote and memory stats. */
#include <math.h>

#include "harness.h"
#include "tests.h"

#define N 9 /* tensor "a": 6 elements (bucket 0), tensor "b": 3 elements (bucket 1) */

static int close_to(float a, float b) { return fabsf(a - b) < 1e-5f; }

static void creation_errors(shardopt_comm comm) {
    shardopt_params p = make_params_a6_b3(), empty = NULL;
    shardopt_optimizer_options o;
    shardopt_sharding_options s;
    shardopt_optimizer opt = NULL;
    float buf[16];
    CHECK_OK(shardopt_optimizer_options_init(&o));
    CHECK_OK(shardopt_sharding_options_init(&s));
    CHECK_ERR(shardopt_optimizer_create(comm, NULL, &o, &s, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT,
              "parameter set handle is NULL");
    CHECK_ERR(shardopt_optimizer_create(comm, p, NULL, &s, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT,
              "optimizer options is NULL");
    CHECK_ERR(shardopt_optimizer_create(comm, p, &o, NULL, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT,
              "sharding options is NULL");
    CHECK_ERR(shardopt_optimizer_create(comm, p, &o, &s, NULL, NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "out is NULL");
    o.struct_size = 0;
    CHECK_ERR(shardopt_optimizer_create(comm, p, &o, &s, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT,
              "struct_size 0 is too small");
    o.struct_size = sizeof o + 8;
    CHECK_ERR(shardopt_optimizer_create(comm, p, &o, &s, NULL, &opt), SHARDOPT_ERR_UNSUPPORTED, "newer shardopt.h");
    CHECK_OK(shardopt_optimizer_options_init(&o));
    o.lr = -1.0;
    CHECK_ERR(shardopt_optimizer_create(comm, p, &o, &s, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT, "lr");
    CHECK_OK(shardopt_optimizer_options_init(&o));
    o.kind = (shardopt_optimizer_kind)12;
    CHECK_ERR(shardopt_optimizer_create(comm, p, &o, &s, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT,
              "invalid optimizer kind 12");
    CHECK_OK(shardopt_optimizer_options_init(&o));
    s.staging_buffers = -1; /* (0 is the default, 1) */
    CHECK_ERR(shardopt_optimizer_create(comm, p, &o, &s, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT,
              "staging_buffers");
    CHECK_OK(shardopt_sharding_options_init(&s));
    s.strategy = (shardopt_strategy)42;
    CHECK_ERR(shardopt_optimizer_create(comm, p, &o, &s, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT,
              "invalid strategy 42");
    CHECK_OK(shardopt_sharding_options_init(&s));
    s.local_sgd_period = -1; /* (0 is the default, 4) */
    CHECK_ERR(shardopt_optimizer_create(comm, p, &o, &s, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT,
              "local_sgd_period");
    CHECK_OK(shardopt_sharding_options_init(&s));
    CHECK_OK(shardopt_params_create(SHARDOPT_F32, 0, &empty));
    CHECK_ERR(shardopt_optimizer_create(comm, empty, &o, &s, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT, "no tensors");
    CHECK_OK(shardopt_params_destroy(empty));
    /* caller-owned parameters: size and strategy checks */
    CHECK_ERR(shardopt_optimizer_create_external(comm, p, &o, &s, NULL, buf, 9, &opt), SHARDOPT_ERR_INVALID_ARGUMENT,
              "param_count is 9 but the layout needs 10");
    CHECK_ERR(shardopt_optimizer_create_external(comm, p, &o, &s, NULL, NULL, 10, &opt),
              SHARDOPT_ERR_INVALID_ARGUMENT, "param_buffer is NULL");
    s.strategy = SHARDOPT_FSDP;
    CHECK_ERR(shardopt_optimizer_create_external(comm, p, &o, &s, NULL, buf, 10, &opt), SHARDOPT_ERR_UNSUPPORTED,
              "not supported for fsdp");
    CHECK(opt == NULL);
    CHECK_OK(shardopt_params_destroy(p));
}

/* One SGD step with gradient 1 everywhere, filled bucket-wise (bucket 0) and tensor-wise (b). */
static void sgd_step(shardopt_optimizer opt) {
    void *g = NULL;
    size_t n = 0, i;
    shardopt_step_result r;
    r.struct_size = sizeof r;
    CHECK_OK(shardopt_optimizer_zero_grad(opt));
    CHECK_OK(shardopt_optimizer_bucket_grad(opt, 0, &g, &n));
    CHECK(n == 6);
    for (i = 0; i < n; ++i) ((float *)g)[i] = 1.f;
    CHECK_OK(shardopt_optimizer_grad_ready(opt, 0));
    CHECK_OK(shardopt_optimizer_tensor_grad(opt, 1, &g, &n));
    CHECK(n == 3);
    for (i = 0; i < n; ++i) ((float *)g)[i] = 1.f;
    CHECK_OK(shardopt_optimizer_grad_ready(opt, 1));
    CHECK_OK(shardopt_optimizer_step(opt, &r));
    CHECK(r.applied == 1 && r.skipped_nonfinite == 0 && r.accumulating == 0 && close_to((float)r.grad_norm, 3.f));
}

static void zero2_rank(shardopt_comm comm, int rank) {
    shardopt_params p = make_params_a6_b3();
    shardopt_optimizer_options o;
    shardopt_sharding_options s;
    shardopt_optimizer opt = NULL;
    shardopt_memory_stats ms;
    shardopt_step_result r;
    float init[N], now[N];
    void *ptr = NULL, *tp = NULL;
    size_t n = 0, padded = 0;
    int i, count = 0, bucket = -1, stop = -1, ok = 1;
    int64_t steps = -1;
    double lr = 0;
    for (i = 0; i < N; ++i) init[i] = (float)(i + 1);
    CHECK_OK(shardopt_optimizer_options_defaults(SHARDOPT_SGD, &o));
    o.lr = 0.1;
    CHECK_OK(shardopt_sharding_options_init(&s));
    s.strategy = SHARDOPT_ZERO2;
    CHECK_OK(shardopt_params_check_array(p, "initial", SHARDOPT_F32, N, 0));
    CHECK_OK(shardopt_params_check_array(p, "parameters", SHARDOPT_F32, 12, 12));
    CHECK_ERR(shardopt_params_check_array(p, "initial", SHARDOPT_F64, N, 0), SHARDOPT_ERR_INVALID_ARGUMENT,
              "initial holds float64 elements but the layout is float32");
    CHECK_ERR(shardopt_params_check_array(p, "initial", SHARDOPT_F32, 3, 0), SHARDOPT_ERR_INVALID_ARGUMENT,
              "initial has 3 elements; the layout needs 9");
    CHECK_ERR(shardopt_params_check_array(p, NULL, SHARDOPT_F32, N, 0), SHARDOPT_ERR_INVALID_ARGUMENT, "what is NULL");
    CHECK_OK(shardopt_optimizer_create(comm, p, &o, &s, init, &opt));
    CHECK_OK(shardopt_params_destroy(p)); /* the optimizer copied the layout */
    CHECK_OK(shardopt_optimizer_check_array(opt, "values", SHARDOPT_F32, N));
    CHECK_ERR(shardopt_optimizer_check_array(opt, "out", SHARDOPT_I64, N), SHARDOPT_ERR_INVALID_ARGUMENT,
              "out holds i64 elements but the layout is float32");
    CHECK_ERR(shardopt_optimizer_check_array(opt, "values", SHARDOPT_F32, 12), SHARDOPT_ERR_INVALID_ARGUMENT,
              "values has 12 elements; the layout needs 9");

    CHECK_OK(shardopt_optimizer_tensor_count(opt, &count));
    CHECK(count == 2);
    CHECK_OK(shardopt_optimizer_bucket_count(opt, &count));
    CHECK(count == 2);
    CHECK_OK(shardopt_optimizer_bucket_info(opt, 1, &n));
    CHECK(n == 3);
    CHECK_OK(shardopt_optimizer_tensor_info(opt, 1, &n, &bucket));
    CHECK(n == 3 && bucket == 1);
    CHECK_OK(shardopt_optimizer_element_count(opt, &n, &padded));
    CHECK(n == N && padded == 10);
    CHECK_ERR(shardopt_optimizer_tensor_info(opt, 2, &n, NULL), SHARDOPT_ERR_INVALID_ARGUMENT,
              "tensor 2 out of range [0, 2)");
    CHECK_ERR(shardopt_optimizer_bucket_info(opt, -1, &n), SHARDOPT_ERR_INVALID_ARGUMENT, "bucket -1 out of range");
    CHECK_ERR(shardopt_optimizer_bucket_info(opt, 0, NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "count is NULL");
    CHECK_ERR(shardopt_optimizer_tensor_count(opt, NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "count is NULL");
    CHECK_ERR(shardopt_optimizer_bucket_count(opt, NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "count is NULL");

    sgd_step(opt);
    CHECK_OK(shardopt_optimizer_get_parameters(opt, now, N));
    for (i = 0; i < N; ++i) ok &= close_to(now[i], init[i] - 0.1f);
    CHECK(ok);
    CHECK_OK(shardopt_optimizer_parameters(opt, &ptr));
    CHECK_OK(shardopt_optimizer_tensor_parameters(opt, 1, &tp));
    CHECK(tp == (void *)((float *)ptr + 6) && close_to(((float *)tp)[0], 6.9f));
    CHECK_OK(shardopt_optimizer_gather(opt, 1, &tp));
    CHECK(close_to(((float *)tp)[0], 6.9f));
    CHECK_OK(shardopt_optimizer_release(opt, 1));
    CHECK_OK(shardopt_optimizer_step_count(opt, &steps));
    CHECK(steps == 1);
    CHECK_ERR(shardopt_optimizer_set_learning_rate(opt, -1.0), SHARDOPT_ERR_INVALID_ARGUMENT, "lr");
    CHECK_OK(shardopt_optimizer_set_learning_rate(opt, 0.2));
    sgd_step(opt);
    CHECK_OK(shardopt_optimizer_get_parameters(opt, now, N));
    CHECK(close_to(now[0], 0.7f));
    /* the options' lr, changed after create (AiDotNet's GetOptions().LearningRate = x), applies from now on;
     * unchanged, the rate in force stays */
    CHECK_OK(shardopt_optimizer_follow_options(opt, &o));
    CHECK_OK(shardopt_optimizer_learning_rate(opt, &lr));
    CHECK(lr == 0.2);
    o.lr = 0.05;
    CHECK_OK(shardopt_optimizer_follow_options(opt, &o));
    CHECK_OK(shardopt_optimizer_learning_rate(opt, &lr));
    CHECK(lr == 0.05);
    CHECK_OK(shardopt_optimizer_set_learning_rate(opt, 0.2));
    CHECK_OK(shardopt_optimizer_follow_options(opt, &o));
    CHECK_OK(shardopt_optimizer_learning_rate(opt, &lr));
    CHECK(lr == 0.2);
    o.lr = -1;
    CHECK_ERR(shardopt_optimizer_follow_options(opt, &o), SHARDOPT_ERR_INVALID_ARGUMENT, "lr");
    CHECK_ERR(shardopt_optimizer_follow_options(opt, NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "is NULL");

    /* wrong sizes, NULL pointers, out-of-range indices */
    CHECK_ERR(shardopt_optimizer_get_parameters(opt, now, N - 1), SHARDOPT_ERR_INVALID_ARGUMENT,
              "count is 8 but the model has 9 parameters");
    CHECK_ERR(shardopt_optimizer_set_parameters(opt, now, N + 1), SHARDOPT_ERR_INVALID_ARGUMENT, "count is 10");
    CHECK_ERR(shardopt_optimizer_get_parameters(opt, NULL, N), SHARDOPT_ERR_INVALID_ARGUMENT, "packed is NULL");
    CHECK_ERR(shardopt_optimizer_set_parameters(opt, NULL, N), SHARDOPT_ERR_INVALID_ARGUMENT, "packed is NULL");
    CHECK_ERR(shardopt_optimizer_parameters(opt, NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "params is NULL");
    CHECK_ERR(shardopt_optimizer_tensor_parameters(opt, 5, &tp), SHARDOPT_ERR_INVALID_ARGUMENT, "tensor 5");
    CHECK_ERR(shardopt_optimizer_gather(opt, 2, &tp), SHARDOPT_ERR_INVALID_ARGUMENT, "bucket 2 out of range");
    CHECK_ERR(shardopt_optimizer_release(opt, 2), SHARDOPT_ERR_INVALID_ARGUMENT, "bucket 2 out of range");
    CHECK_ERR(shardopt_optimizer_bucket_grad(opt, 2, &ptr, NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "bucket 2");
    CHECK_ERR(shardopt_optimizer_bucket_grad(opt, 0, NULL, NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "grad is NULL");
    CHECK_ERR(shardopt_optimizer_tensor_grad(opt, -3, &ptr, NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "tensor -3");
    CHECK_ERR(shardopt_optimizer_tensor_grad(opt, 0, NULL, NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "grad is NULL");
    CHECK_ERR(shardopt_optimizer_grad_ready(opt, 9), SHARDOPT_ERR_INVALID_ARGUMENT, "bucket 9");
    CHECK_ERR(shardopt_optimizer_step_count(opt, NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "steps is NULL");
    CHECK_ERR(shardopt_optimizer_should_early_stop(opt, 0, NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "stop is NULL");
    CHECK_ERR(shardopt_optimizer_memory_stats(opt, NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "stats is NULL");
    ms.struct_size = 0;
    CHECK_ERR(shardopt_optimizer_memory_stats(opt, &ms), SHARDOPT_ERR_INVALID_ARGUMENT, "struct_size is not set");
    r.struct_size = 0;
    CHECK_ERR(shardopt_optimizer_step(opt, &r), SHARDOPT_ERR_INVALID_ARGUMENT, "struct_size is not set");

    /* set_parameters, state, vote, stats */
    CHECK_OK(shardopt_optimizer_set_parameters(opt, init, N));
    CHECK_OK(shardopt_optimizer_get_parameters(opt, now, N));
    CHECK(now[8] == 9.f);
    CHECK_OK(shardopt_optimizer_synchronize_state(opt));
    CHECK_OK(shardopt_optimizer_should_early_stop(opt, rank == 1, &stop));
    CHECK(stop == 1);
    CHECK_OK(shardopt_optimizer_should_early_stop(opt, 0, &stop));
    CHECK(stop == 0);
    ms.struct_size = sizeof ms;
    CHECK_OK(shardopt_optimizer_memory_stats(opt, &ms));
    CHECK(ms.params_bytes == 10 * sizeof(float) && ms.grads_bytes > 0 && ms.grads_bytes < 10 * sizeof(float) &&
          ms.total_bytes >= ms.params_bytes + ms.grads_bytes);
    /* a smaller (older) output struct is written only up to its struct_size */
    ms.struct_size = sizeof(size_t) + sizeof(uint64_t);
    ms.grads_bytes = 12345;
    CHECK_OK(shardopt_optimizer_memory_stats(opt, &ms));
    CHECK(ms.grads_bytes == 12345 && ms.struct_size == sizeof(size_t) + sizeof(uint64_t));
    CHECK_OK(shardopt_optimizer_destroy(opt));
}

static void fsdp_rank(shardopt_comm comm) {
    shardopt_params p = make_params_a6_b3();
    shardopt_optimizer_options o;
    shardopt_sharding_options s;
    shardopt_optimizer opt = NULL;
    float init[N], now[N];
    void *ptr = NULL, *unit = NULL;
    int i;
    for (i = 0; i < N; ++i) init[i] = (float)(i + 1);
    CHECK_OK(shardopt_optimizer_options_defaults(SHARDOPT_SGD, &o));
    o.lr = 0.1;
    CHECK_OK(shardopt_sharding_options_init(&s));
    s.strategy = SHARDOPT_FSDP;
    s.fsdp_prefetch = SHARDOPT_DISABLE;
    CHECK_OK(shardopt_optimizer_create(comm, p, &o, &s, init, &opt));
    CHECK_ERR(shardopt_optimizer_parameters(opt, &ptr), SHARDOPT_ERR_INVALID_STATE, "FSDP keeps parameters sharded");
    CHECK_ERR(shardopt_optimizer_tensor_parameters(opt, 1, &ptr), SHARDOPT_ERR_INVALID_STATE,
              "unit 1, which is not gathered");
    CHECK_OK(shardopt_optimizer_gather(opt, 1, &unit));
    CHECK_OK(shardopt_optimizer_tensor_parameters(opt, 1, &ptr));
    CHECK(ptr == unit && ((float *)ptr)[2] == 9.f);
    CHECK_OK(shardopt_optimizer_release(opt, 1));
    CHECK_ERR(shardopt_optimizer_tensor_parameters(opt, 1, &ptr), SHARDOPT_ERR_INVALID_STATE, "not gathered");
    sgd_step(opt);
    CHECK_OK(shardopt_optimizer_get_parameters(opt, now, N));
    CHECK(close_to(now[8], 8.9f) && close_to(now[0], 0.9f));
    CHECK_OK(shardopt_optimizer_destroy(opt));
    CHECK_OK(shardopt_params_destroy(p));
}

static void external_rank(shardopt_comm comm) {
    shardopt_params p = make_params_a6_b3();
    shardopt_optimizer_options o;
    shardopt_sharding_options s;
    shardopt_optimizer opt = NULL;
    float init[N], mine[10];
    void *ptr = NULL;
    size_t padded = 0;
    int i;
    for (i = 0; i < N; ++i) init[i] = (float)(i + 1);
    CHECK_OK(shardopt_optimizer_options_defaults(SHARDOPT_SGD, &o));
    o.lr = 0.5;
    CHECK_OK(shardopt_sharding_options_init(&s));
    CHECK_OK(shardopt_params_padded_count(p, 2, &padded));
    CHECK(padded == 10);
    CHECK_OK(shardopt_optimizer_create_external(comm, p, &o, &s, init, mine, padded, &opt));
    CHECK_OK(shardopt_optimizer_parameters(opt, &ptr));
    CHECK(ptr == (void *)mine && mine[0] == 1.f && mine[6] == 7.f);
    sgd_step(opt);
    CHECK(close_to(mine[0], 0.5f) && close_to(mine[8], 8.5f)); /* updated in the caller's memory */
    CHECK_OK(shardopt_optimizer_destroy(opt));
    CHECK_OK(shardopt_params_destroy(p));
}

static void optimizer_rank(shardopt_comm comm, int rank, void *arg) {
    (void)arg;
    CHECK_OK(shardopt_comm_set_timeout(comm, 60000));
    creation_errors(comm);
    zero2_rank(comm, rank);
    fsdp_rank(comm);
    external_rank(comm);
}

void test_optimizer(void) { run_ranks(2, optimizer_rank, NULL); }

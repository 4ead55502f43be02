/* The fields ABI 2 added to the sharding options and the step result: the memory space and its
 * stream (refused where they cannot apply), update_threads (the same bits for any count),
 * overlap_param_gather (the same parameters as without it), and step's timings. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>

#include <string.h>

#include "harness.h"
#include "tests.h"

/* CUDA memory needs a GPU communicator; a stream needs CUDA memory. */
static void test_memory_space_errors(void) {
    shardopt_comm c = NULL;
    shardopt_params p = make_params_a6_b3();
    shardopt_optimizer_options o = {.struct_size = sizeof o};
    shardopt_sharding_options s = {.struct_size = sizeof s};
    shardopt_optimizer opt = NULL;
    float buf[16] = {0};
    int not_a_stream = 0;
    CHECK_OK(shardopt_comm_create_inprocess(1, &c));
    s.memory = SHARDOPT_MEMORY_CUDA;
#ifdef SHARDOPT_TEST_HAVE_CUDA
    CHECK_ERR(shardopt_optimizer_create(c, p, &o, &s, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT,
              "communicator of backend 'inprocess' has no device");
    CHECK_ERR(shardopt_optimizer_create_external(c, p, &o, &s, NULL, buf, 9, &opt), SHARDOPT_ERR_INVALID_ARGUMENT,
              "communicator of backend 'inprocess' has no device");
#else
    CHECK_ERR(shardopt_optimizer_create(c, p, &o, &s, NULL, &opt), SHARDOPT_ERR_UNSUPPORTED, "built without CUDA");
    CHECK_ERR(shardopt_optimizer_create_external(c, p, &o, &s, NULL, buf, 9, &opt), SHARDOPT_ERR_UNSUPPORTED,
              "built without CUDA");
#endif
    s.memory = SHARDOPT_MEMORY_HOST;
    s.cuda_stream = &not_a_stream;
    CHECK_ERR(shardopt_optimizer_create(c, p, &o, &s, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT,
              "cuda_stream is given but memory is host");
    s.cuda_stream = NULL;
    s.update_threads = -1;
    CHECK_ERR(shardopt_optimizer_create(c, p, &o, &s, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT, "update_threads");
    CHECK(opt == NULL);
    CHECK_OK(shardopt_params_destroy(p));
    CHECK_OK(shardopt_comm_destroy(c));
}

/* Large enough that each rank's update is split across threads (updates under 64K elements stay
 * on the calling thread): ZeRO-2 on 2 ranks, so each owns about 100K elements. */
#define BIG_A 150001
#define BIG_B 50003
#define BIG (BIG_A + BIG_B)

static float big_grad(int rank, int step, size_t i) {
    return (float)((int)((i * 2654435761u + (size_t)step * 97u + (size_t)rank * 13u) % 1001u) - 500) * 1e-3f;
}

/* Runs 3 Adam steps (weight decay on) with update_threads = threads into params[BIG]; checks the
 * step results' timings on the way. */
static void train_big(shardopt_comm comm, int rank, int threads, float *params) {
    shardopt_params p = NULL;
    shardopt_optimizer_options o;
    shardopt_sharding_options s;
    shardopt_optimizer opt = NULL;
    int step;
    CHECK_OK(shardopt_params_create(SHARDOPT_F32, 0, &p));
    CHECK_OK(shardopt_params_add(p, "a", BIG_A, 0, NULL));
    CHECK_OK(shardopt_params_add(p, "b", BIG_B, 0, NULL));
    CHECK_OK(shardopt_optimizer_options_defaults(SHARDOPT_ADAMW, &o));
    o.lr = 0.01;
    CHECK_OK(shardopt_sharding_options_init(&s));
    s.strategy = SHARDOPT_ZERO2;
    s.update_threads = threads;
    CHECK_OK(shardopt_optimizer_create(comm, p, &o, &s, NULL, &opt));
    for (step = 0; step < 3; ++step) {
        shardopt_step_result r;
        float *g = NULL;
        size_t n = 0, i;
        CHECK_OK(shardopt_optimizer_zero_grad(opt));
        CHECK_OK(shardopt_optimizer_tensor_grad(opt, 0, (void **)&g, &n));
        for (i = 0; i < n; ++i) g[i] = big_grad(rank, step, i);
        CHECK_OK(shardopt_optimizer_tensor_grad(opt, 1, (void **)&g, &n));
        for (i = 0; i < n; ++i) g[i] = big_grad(rank, step, BIG_A + i);
        r.struct_size = sizeof r;
        r.reduce_wait_seconds = r.update_seconds = r.post_update_seconds = -1.0;
        CHECK_OK(shardopt_optimizer_step(opt, &r));
        CHECK(r.applied == 1);
        /* the timings are written, finite and >= 0 */
        CHECK(r.reduce_wait_seconds >= 0.0 && r.update_seconds >= 0.0 && r.post_update_seconds >= 0.0);
        CHECK(isfinite(r.reduce_wait_seconds) && isfinite(r.update_seconds) && isfinite(r.post_update_seconds));
        CHECK(r.update_seconds > 0.0); /* 100K elements of AdamW take some time */
    }
    CHECK_OK(shardopt_optimizer_get_parameters(opt, params, BIG));
    CHECK_OK(shardopt_optimizer_destroy(opt));
    CHECK_OK(shardopt_params_destroy(p));
}

static void update_threads_rank(shardopt_comm comm, int rank, void *arg) {
    float *one = (float *)malloc(BIG * sizeof(float)), *four = (float *)malloc(BIG * sizeof(float));
    float *automatic = (float *)malloc(BIG * sizeof(float));
    (void)arg;
    CHECK_OK(shardopt_comm_set_timeout(comm, 120000));
    train_big(comm, rank, 1, one);
    train_big(comm, rank, 4, four);
    train_big(comm, rank, 0, automatic);
    CHECK(memcmp(one, four, BIG * sizeof(float)) == 0);
    CHECK(memcmp(one, automatic, BIG * sizeof(float)) == 0);
    free(one);
    free(four);
    free(automatic);
}

/* An older step result (without the timings) is written only up to its struct_size. */
static void test_step_result_prefix(void) {
    shardopt_comm c = NULL;
    shardopt_params p = make_params_a6_b3();
    shardopt_optimizer_options o = {.struct_size = sizeof o};
    shardopt_sharding_options s = {.struct_size = sizeof s};
    shardopt_optimizer opt = NULL;
    shardopt_step_result r;
    float *g = NULL;
    size_t n = 0;
    CHECK_OK(shardopt_comm_create_inprocess(1, &c));
    CHECK_OK(shardopt_optimizer_create(c, p, &o, &s, NULL, &opt));
    CHECK_OK(shardopt_optimizer_zero_grad(opt));
    CHECK_OK(shardopt_optimizer_bucket_grad(opt, 0, (void **)&g, &n));
    g[0] = 2.f;
    r.struct_size = offsetof(shardopt_step_result, reduce_wait_seconds);
    r.reduce_wait_seconds = r.update_seconds = r.post_update_seconds = -1.0;
    r.grad_norm = -1.0;
    CHECK_OK(shardopt_optimizer_step(opt, &r));
    CHECK(r.applied == 1 && r.grad_norm == 2.0);
    CHECK(r.reduce_wait_seconds == -1.0 && r.update_seconds == -1.0 && r.post_update_seconds == -1.0);
    CHECK(r.struct_size == offsetof(shardopt_step_result, reduce_wait_seconds));
    CHECK_OK(shardopt_optimizer_destroy(opt));
    CHECK_OK(shardopt_params_destroy(p));
    CHECK_OK(shardopt_comm_destroy(c));
}

/* overlap_param_gather: ZeRO-1 and ZeRO-2 with the allgather left running end where they end
 * without it, read through each of the calls that complete it. */
#define N 9
static void overlap_rank(shardopt_comm comm, int rank, void *arg) {
    const shardopt_strategy strategy = *(const shardopt_strategy *)arg;
    const float initial[N] = {0.5f, -1.f, 2.f, 0.25f, -0.75f, 1.5f, 3.f, -2.f, 1.f};
    shardopt_params p = make_params_a6_b3();
    shardopt_optimizer_options o;
    shardopt_sharding_options s;
    shardopt_optimizer off = NULL, on = NULL;
    int step;
    CHECK_OK(shardopt_comm_set_timeout(comm, 60000));
    CHECK_OK(shardopt_optimizer_options_init(&o));
    o.lr = 0.05;
    CHECK_OK(shardopt_sharding_options_init(&s));
    s.strategy = strategy;
    CHECK_OK(shardopt_optimizer_create(comm, p, &o, &s, initial, &off));
    s.overlap_param_gather = SHARDOPT_ENABLE;
    CHECK_OK(shardopt_optimizer_create(comm, p, &o, &s, initial, &on));
    for (step = 0; step < 6; ++step) {
        shardopt_optimizer both[2];
        shardopt_step_result r[2];
        float a[N], b[N];
        float *pa = NULL, *pb = NULL;
        int k;
        both[0] = off;
        both[1] = on;
        for (k = 0; k < 2; ++k) {
            float *g = NULL;
            size_t n = 0, i;
            CHECK_OK(shardopt_optimizer_zero_grad(both[k]));
            CHECK_OK(shardopt_optimizer_bucket_grad(both[k], 0, (void **)&g, &n));
            for (i = 0; i < n; ++i) g[i] = 0.1f * (float)((int)(i + (size_t)step + 3u * (size_t)rank) % 7 - 3);
            CHECK_OK(shardopt_optimizer_grad_ready(both[k], 0));
            CHECK_OK(shardopt_optimizer_tensor_grad(both[k], 1, (void **)&g, &n));
            for (i = 0; i < n; ++i) g[i] = 0.2f * (float)((int)(i + (size_t)step) % 3 - 1);
            CHECK_OK(shardopt_optimizer_grad_ready(both[k], 1));
            r[k].struct_size = sizeof r[k];
            CHECK_OK(shardopt_optimizer_step(both[k], &r[k]));
        }
        CHECK(r[0].applied == r[1].applied && r[0].grad_norm == r[1].grad_norm);
        /* each of the calls that complete the gather, in turn */
        switch (step % 3) {
        case 0:
            CHECK_OK(shardopt_optimizer_get_parameters(off, a, N));
            CHECK_OK(shardopt_optimizer_get_parameters(on, b, N));
            CHECK(memcmp(a, b, sizeof a) == 0);
            break;
        case 1:
            CHECK_OK(shardopt_optimizer_gather(off, 1, (void **)&pa));
            CHECK_OK(shardopt_optimizer_gather(on, 1, (void **)&pb));
            CHECK(memcmp(pa, pb, 3 * sizeof(float)) == 0);
            CHECK_OK(shardopt_optimizer_release(off, 1));
            CHECK_OK(shardopt_optimizer_release(on, 1));
            CHECK_OK(shardopt_optimizer_tensor_parameters(off, 0, (void **)&pa));
            CHECK_OK(shardopt_optimizer_tensor_parameters(on, 0, (void **)&pb));
            CHECK(memcmp(pa, pb, 6 * sizeof(float)) == 0);
            break;
        default:
            CHECK_OK(shardopt_optimizer_parameters(off, (void **)&pa));
            CHECK_OK(shardopt_optimizer_parameters(on, (void **)&pb));
            CHECK(memcmp(pa, pb, 6 * sizeof(float)) == 0);
            break; /* the next step completes it too */
        }
    }
    CHECK_OK(shardopt_optimizer_destroy(off));
    CHECK_OK(shardopt_optimizer_destroy(on));
    CHECK_OK(shardopt_params_destroy(p));
}

/* Ranks given different initial parameters: rank 0's everywhere by default (AUTO), each rank's
 * own with broadcast_initial DISABLE. */
static void broadcast_initial_rank(shardopt_comm comm, int rank, void *arg) {
    const shardopt_switch keep = arg ? SHARDOPT_DISABLE : SHARDOPT_AUTO;
    shardopt_params params = NULL;
    shardopt_optimizer opt = NULL;
    shardopt_optimizer_options sgd;
    shardopt_sharding_options sharding;
    float initial[8], got[8];
    size_t i;
    memset(&sgd, 0, sizeof sgd);
    memset(&sharding, 0, sizeof sharding);
    sgd.struct_size = sizeof sgd;
    sharding.struct_size = sizeof sharding;
    CHECK_OK(shardopt_params_create(SHARDOPT_F32, 0, &params));
    CHECK_OK(shardopt_params_add(params, "w", 8, 0, NULL));
    for (i = 0; i < 8; ++i) initial[i] = (float)i + 10.0f * (float)rank;
    sharding.broadcast_initial = keep;
    CHECK_OK(shardopt_optimizer_create(comm, params, &sgd, &sharding, initial, &opt));
    CHECK_OK(shardopt_optimizer_get_parameters(opt, got, 8));
    for (i = 0; i < 8; ++i) CHECK(got[i] == (keep == SHARDOPT_DISABLE ? initial[i] : (float)i));
    CHECK_OK(shardopt_optimizer_destroy(opt));
    CHECK_OK(shardopt_params_destroy(params));
}

void test_knobs(void) {
    static const shardopt_strategy overlapped[] = {SHARDOPT_ZERO1, SHARDOPT_ZERO2};
    test_memory_space_errors();
    test_step_result_prefix();
    run_ranks(2, update_threads_rank, NULL);
    run_ranks(3, broadcast_initial_rank, NULL);
    run_ranks(3, broadcast_initial_rank, (void *)1);
    run_ranks(2, overlap_rank, (void *)&overlapped[0]);
    run_ranks(2, overlap_rank, (void *)&overlapped[1]);
}

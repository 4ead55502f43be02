/* The other strategies and shared options through the ABI, on 4 ranks: hybrid (data x tensor
 * grid), Local SGD, gradient accumulation with clipping (DDP), and invalid hybrid options. */
#include <math.h>

#include "harness.h"
#include "tests.h"

#define N 6

static shardopt_optimizer make(shardopt_comm comm, const shardopt_sharding_options *s, shardopt_status expect,
                               const char *text) {
    shardopt_params p = NULL;
    shardopt_optimizer_options o;
    shardopt_optimizer opt = NULL;
    float init[N] = {1, 2, 3, 4, 5, 6};
    CHECK_OK(shardopt_params_create(SHARDOPT_F32, 0, &p));
    CHECK_OK(shardopt_params_add(p, "w", 4, 0, NULL));
    CHECK_OK(shardopt_params_add(p, "b", 2, 1, NULL)); /* tp_replicated */
    CHECK_OK(shardopt_optimizer_options_defaults(SHARDOPT_SGD, &o));
    o.lr = 0.1;
    if (expect == SHARDOPT_OK)
        CHECK_OK(shardopt_optimizer_create(comm, p, &o, s, init, &opt));
    else
        CHECK_ERR(shardopt_optimizer_create(comm, p, &o, s, init, &opt), expect, text);
    CHECK_OK(shardopt_params_destroy(p));
    return opt;
}

/* One step with gradient `g` everywhere; returns the result. */
static shardopt_step_result step(shardopt_optimizer opt, float g) {
    shardopt_step_result r;
    void *grad = NULL;
    size_t n = 0, i;
    r.struct_size = sizeof r;
    CHECK_OK(shardopt_optimizer_zero_grad(opt));
    CHECK_OK(shardopt_optimizer_bucket_grad(opt, 0, &grad, &n));
    for (i = 0; i < n; ++i) ((float *)grad)[i] = g;
    CHECK_OK(shardopt_optimizer_step(opt, &r));
    return r;
}

static void strategies_rank(shardopt_comm comm, int rank, void *arg) {
    shardopt_sharding_options s;
    shardopt_optimizer opt;
    shardopt_step_result r;
    float now[N];
    (void)arg;
    CHECK_OK(shardopt_comm_set_timeout(comm, 60000));

    /* hybrid: 2 data x 2 tensor ranks, ZeRO-2 inside each data group */
    CHECK_OK(shardopt_sharding_options_init(&s));
    s.strategy = SHARDOPT_HYBRID;
    s.tensor_parallel_size = 2;
    s.hybrid_data_strategy = SHARDOPT_ZERO2; /* (the default is DDP) */
    opt = make(comm, &s, SHARDOPT_OK, "");
    r = step(opt, 1.f);
    CHECK(r.applied == 1);
    CHECK_OK(shardopt_optimizer_get_parameters(opt, now, N));
    CHECK(fabsf(now[0] - 0.9f) < 1e-5f && fabsf(now[5] - 5.9f) < 1e-5f);
    CHECK_OK(shardopt_optimizer_destroy(opt));

    /* invalid hybrid sizes are refused on every rank */
    s.tensor_parallel_size = 3;
    opt = make(comm, &s, SHARDOPT_ERR_INVALID_ARGUMENT, "3");
    CHECK(opt == NULL);
    CHECK_OK(shardopt_sharding_options_init(&s));
    s.strategy = SHARDOPT_HYBRID;
    s.hybrid_data_strategy = SHARDOPT_LOCAL_SGD;
    opt = make(comm, &s, SHARDOPT_ERR_INVALID_ARGUMENT, "hybrid_data_strategy");
    CHECK(opt == NULL);

    /* DDP with accumulation over 2 micro-steps and clipping to norm 1 */
    CHECK_OK(shardopt_sharding_options_init(&s));
    s.gradient_accumulation_steps = 2;
    s.max_grad_norm = 1.0;
    opt = make(comm, &s, SHARDOPT_OK, "");
    r = step(opt, 1.f);
    CHECK(r.accumulating == 1 && r.applied == 0);
    r = step(opt, 3.f); /* mean gradient 2 on 6 elements */
    CHECK(r.applied == 1 && fabs(r.grad_norm - sqrt(6.0 * 4.0)) < 1e-4);
    CHECK_OK(shardopt_optimizer_get_parameters(opt, now, N));
    CHECK(fabsf(now[0] - (1.f - 0.1f / sqrtf(6.f))) < 1e-5f); /* clipped to unit norm */
    CHECK_OK(shardopt_optimizer_destroy(opt));

    /* Local SGD, period 2: local steps, then parameters averaged */
    CHECK_OK(shardopt_sharding_options_init(&s));
    s.strategy = SHARDOPT_LOCAL_SGD;
    s.local_sgd_period = 2;
    opt = make(comm, &s, SHARDOPT_OK, "");
    r = step(opt, (float)(rank + 1));
    CHECK_OK(shardopt_optimizer_get_parameters(opt, now, N));
    CHECK(r.applied == 1 && fabsf(now[0] - (1.f - 0.1f * (float)(rank + 1))) < 1e-5f);
    r = step(opt, (float)(rank + 1));
    CHECK_OK(shardopt_optimizer_get_parameters(opt, now, N));
    CHECK(fabsf(now[0] - 0.5f) < 1e-5f); /* 1 - 0.2 * mean(1, 2, 3, 4) on every rank */
    CHECK_OK(shardopt_optimizer_destroy(opt));
}

void test_strategies(void) { run_ranks(4, strategies_rank, NULL); }

/* Zero means default: zeroed options structs (struct_size set) train exactly like the explicit
 * defaults of the _init functions, step for step, under every strategy on 2 ranks; the switches
 * take SHARDOPT_AUTO/ENABLE/DISABLE only; field_mask mistakes are INVALID_ARGUMENT naming the
 * field; zeroed optimize options run one epoch. */
#include <math.h>
#include <stddef.h>

#include "harness.h"
#include "tests.h"

#define N 9 /* tensor "a": 6 elements (bucket 0), tensor "b": 3 elements (bucket 1) */
#define STEPS 6
#define NAN_STEP 2 /* rank 1 has a NaN gradient in this step */

static const float initial[N] = {0.5f, -1.f, 2.f, 0.25f, -0.75f, 1.5f, 3.f, -2.f, 1.f};

static float grad_value(int rank, int step, size_t i) {
    if (step == NAN_STEP && rank == 1 && i == 4) return NAN;
    return 0.1f * (float)(rank + 1) * (float)((step + (int)i + 2 * rank) % 5 - 2);
}

/* One step: bucket 0 filled bucket-wise, tensor "b" tensor-wise. FSDP units are gathered and
 * released first, as a forward would (with prefetch, gather(0) also starts unit 1). */
static void one_step(shardopt_optimizer o, shardopt_strategy strategy, int rank, int step, shardopt_step_result *r) {
    float *g = NULL;
    size_t n = 0, i;
    if (strategy == SHARDOPT_FSDP) {
        CHECK_OK(shardopt_optimizer_gather(o, 0, NULL));
        CHECK_OK(shardopt_optimizer_release(o, 0));
        CHECK_OK(shardopt_optimizer_gather(o, 1, NULL));
        CHECK_OK(shardopt_optimizer_release(o, 1));
    }
    CHECK_OK(shardopt_optimizer_zero_grad(o));
    CHECK_OK(shardopt_optimizer_bucket_grad(o, 0, (void **)&g, &n));
    for (i = 0; i < n; ++i) g[i] = grad_value(rank, step, i);
    CHECK_OK(shardopt_optimizer_grad_ready(o, 0));
    CHECK_OK(shardopt_optimizer_tensor_grad(o, 1, (void **)&g, &n));
    for (i = 0; i < n; ++i) g[i] = grad_value(rank, step, 6 + i);
    CHECK_OK(shardopt_optimizer_grad_ready(o, 1));
    CHECK_OK(shardopt_optimizer_step(o, r));
}

static int same_step(const shardopt_step_result *a, const shardopt_step_result *b) {
    return a->applied == b->applied && a->skipped_nonfinite == b->skipped_nonfinite &&
           a->accumulating == b->accumulating && memcmp(&a->grad_norm, &b->grad_norm, sizeof a->grad_norm) == 0;
}

/* The same training from explicit defaults and from zeroed structs; arg: the strategy. */
static void zeroed_equals_init(shardopt_comm comm, int rank, void *arg) {
    const shardopt_strategy strategy = *(const shardopt_strategy *)arg;
    shardopt_params p = make_params_a6_b3();
    shardopt_optimizer_options io, zo = {.struct_size = sizeof zo};
    shardopt_sharding_options is, zs = {.struct_size = sizeof zs};
    shardopt_optimizer explicit_defaults = NULL, zeroed = NULL;
    shardopt_memory_stats im = {.struct_size = sizeof im}, zm = {.struct_size = sizeof zm};
    float a[N], b[N];
    int step;
    CHECK_OK(shardopt_comm_set_timeout(comm, 60000));
    /* Adam: its defaults for the fields without a bit (betas, eps...) */
    CHECK_OK(shardopt_optimizer_options_defaults(SHARDOPT_ADAM, &io));
    zo.field_mask = SHARDOPT_OPT_FIELD_KIND;
    zo.kind = SHARDOPT_ADAM;
    CHECK_OK(shardopt_sharding_options_init(&is));
    is.strategy = zs.strategy = strategy;
    CHECK_OK(shardopt_optimizer_create(comm, p, &io, &is, initial, &explicit_defaults));
    CHECK_OK(shardopt_optimizer_create(comm, p, &zo, &zs, initial, &zeroed));
    for (step = 0; step < STEPS; ++step) {
        shardopt_step_result ir = {.struct_size = sizeof ir}, zr = {.struct_size = sizeof zr};
        one_step(explicit_defaults, strategy, rank, step, &ir);
        one_step(zeroed, strategy, rank, step, &zr);
        CHECK(same_step(&ir, &zr));
        /* skip_nonfinite: AUTO is on; accumulation: 0 is 1 micro-step */
        CHECK(zr.skipped_nonfinite == (step == NAN_STEP) && zr.applied == (step != NAN_STEP) && zr.accumulating == 0);
        CHECK_OK(shardopt_optimizer_get_parameters(explicit_defaults, a, N));
        CHECK_OK(shardopt_optimizer_get_parameters(zeroed, b, N));
        CHECK(memcmp(a, b, sizeof a) == 0);
    }
    if (strategy == SHARDOPT_LOCAL_SGD) {
        /* period 0 is 4: of the 5 applied steps, the last is local, so the ranks differ again
         * (with a period of 1 or 5 they would agree) */
        float rank0[N];
        memcpy(rank0, b, sizeof b);
        CHECK_OK(shardopt_broadcast(comm, rank0, N, SHARDOPT_F32, 0));
        CHECK(rank == 0 || memcmp(rank0, b, sizeof b) != 0);
    }
    /* staging buffers, prefetch: the same memory */
    CHECK_OK(shardopt_optimizer_memory_stats(explicit_defaults, &im));
    CHECK_OK(shardopt_optimizer_memory_stats(zeroed, &zm));
    CHECK(memcmp(&im, &zm, sizeof im) == 0);
    CHECK_OK(shardopt_optimizer_destroy(explicit_defaults));
    CHECK_OK(shardopt_optimizer_destroy(zeroed));
    CHECK_OK(shardopt_params_destroy(p));
}

/* A struct with every field 0, SGD included, against shardopt_optimizer_options_defaults(SGD). */
static void all_zero_is_sgd(shardopt_comm comm, int rank, void *arg) {
    shardopt_params p = make_params_a6_b3();
    shardopt_optimizer_options io, zo = {.struct_size = sizeof zo};
    shardopt_sharding_options zs = {.struct_size = sizeof zs}, is;
    shardopt_optimizer o1 = NULL, o2 = NULL;
    float a[N], b[N];
    int step;
    (void)arg;
    CHECK_OK(shardopt_optimizer_options_defaults(SHARDOPT_SGD, &io));
    CHECK_OK(shardopt_sharding_options_init(&is));
    CHECK_OK(shardopt_optimizer_create(comm, p, &io, &is, initial, &o1));
    CHECK_OK(shardopt_optimizer_create(comm, p, &zo, &zs, initial, &o2));
    for (step = 0; step < 3; ++step) {
        shardopt_step_result r1 = {.struct_size = sizeof r1}, r2 = {.struct_size = sizeof r2};
        one_step(o1, SHARDOPT_DDP, rank, step, &r1);
        one_step(o2, SHARDOPT_DDP, rank, step, &r2);
        CHECK(same_step(&r1, &r2));
    }
    CHECK_OK(shardopt_optimizer_get_parameters(o1, a, N));
    CHECK_OK(shardopt_optimizer_get_parameters(o2, b, N));
    CHECK(memcmp(a, b, sizeof a) == 0 && memcmp(a, initial, sizeof a) != 0);
    CHECK_OK(shardopt_optimizer_destroy(o1));
    CHECK_OK(shardopt_optimizer_destroy(o2));
    CHECK_OK(shardopt_params_destroy(p));
}

static void test_zeroed_equals_init(void) {
    static const shardopt_strategy strategies[] = {SHARDOPT_DDP,  SHARDOPT_ZERO1,     SHARDOPT_ZERO2,
                                                   SHARDOPT_FSDP, SHARDOPT_LOCAL_SGD, SHARDOPT_HYBRID};
    size_t i;
    for (i = 0; i < sizeof strategies / sizeof strategies[0]; ++i)
        run_ranks(2, zeroed_equals_init, (void *)&strategies[i]);
    run_ranks(2, all_zero_is_sgd, NULL);
}

/* A switch is AUTO, ENABLE or DISABLE: DISABLE really turns skip_nonfinite off; other values are
 * refused naming the field. */
static void test_switches(void) {
    shardopt_comm c = NULL;
    shardopt_params p = make_params_a6_b3();
    shardopt_optimizer_options o = {.struct_size = sizeof o};
    shardopt_sharding_options s = {.struct_size = sizeof s};
    shardopt_optimizer opt = NULL;
    shardopt_step_result r = {.struct_size = sizeof r};
    float *g = NULL, now[N];
    size_t n = 0;
    CHECK_OK(shardopt_comm_create_inprocess(1, &c));
    s.skip_nonfinite = SHARDOPT_DISABLE;
    CHECK_OK(shardopt_optimizer_create(c, p, &o, &s, initial, &opt));
    CHECK_OK(shardopt_optimizer_zero_grad(opt));
    CHECK_OK(shardopt_optimizer_bucket_grad(opt, 0, (void **)&g, &n));
    g[0] = NAN;
    CHECK_OK(shardopt_optimizer_step(opt, &r));
    CHECK_OK(shardopt_optimizer_get_parameters(opt, now, N));
    CHECK(r.applied == 1 && r.skipped_nonfinite == 0 && isnan(now[0])); /* the NaN went in */
    CHECK_OK(shardopt_optimizer_destroy(opt));
    opt = NULL;

    s.skip_nonfinite = (shardopt_switch)3;
    CHECK_ERR(shardopt_optimizer_create(c, p, &o, &s, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT,
              "skip_nonfinite is 3, not a shardopt_switch");
    s.skip_nonfinite = SHARDOPT_AUTO;
    s.fsdp_prefetch = (shardopt_switch)-1;
    CHECK_ERR(shardopt_optimizer_create(c, p, &o, &s, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT,
              "fsdp_prefetch is -1, not a shardopt_switch");
    s.fsdp_prefetch = SHARDOPT_ENABLE;
    s.overlap_param_gather = (shardopt_switch)7;
    CHECK_ERR(shardopt_optimizer_create(c, p, &o, &s, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT,
              "overlap_param_gather is 7");
    s.overlap_param_gather = SHARDOPT_DISABLE;
    s.memory = (shardopt_memory_space)2;
    CHECK_ERR(shardopt_optimizer_create(c, p, &o, &s, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT,
              "memory is 2, not a shardopt_memory_space");
    s.memory = SHARDOPT_MEMORY_HOST;
    /* negative values still fail, naming the field (0 would be the default) */
    s.gradient_accumulation_steps = -2;
    CHECK_ERR(shardopt_optimizer_create(c, p, &o, &s, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT,
              "gradient_accumulation_steps");
    s.gradient_accumulation_steps = 0;
    s.hybrid_data_strategy = (shardopt_strategy)9;
    CHECK_ERR(shardopt_optimizer_create(c, p, &o, &s, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT,
              "hybrid_data_strategy: invalid strategy 9");
    CHECK(opt == NULL);
    CHECK_OK(shardopt_params_destroy(p));
    CHECK_OK(shardopt_comm_destroy(c));
}

/* field_mask: a forgotten bit is an error, never a value silently ignored. */
static void test_field_mask(void) {
    shardopt_comm c = NULL;
    shardopt_params p = make_params_a6_b3();
    shardopt_optimizer_options o;
    shardopt_sharding_options s = {.struct_size = sizeof s};
    shardopt_optimizer opt = NULL;
    CHECK_OK(shardopt_comm_create_inprocess(1, &c));

    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.lr = 0.1; /* without its bit */
    CHECK_ERR(shardopt_optimizer_create(c, p, &o, &s, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT,
              "lr is set but SHARDOPT_OPT_FIELD_LR is not in field_mask");
    o.field_mask = SHARDOPT_OPT_FIELD_LR;
    o.kind = SHARDOPT_ADAM; /* without its bit */
    CHECK_ERR(shardopt_optimizer_create(c, p, &o, &s, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT,
              "kind is set but SHARDOPT_OPT_FIELD_KIND is not in field_mask");
    o.field_mask |= SHARDOPT_OPT_FIELD_KIND;
    CHECK_OK(shardopt_optimizer_create(c, p, &o, &s, NULL, &opt));
    CHECK_OK(shardopt_optimizer_destroy(opt));
    opt = NULL;
    o.field_mask |= (uint64_t)1 << 40;
    CHECK_ERR(shardopt_optimizer_create(c, p, &o, &s, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT,
              "field_mask has bits this library does not know");
    /* a bit for a field beyond the caller's struct_size */
    memset(&o, 0, sizeof o);
    o.struct_size = offsetof(shardopt_optimizer_options, lr);
    o.field_mask = SHARDOPT_OPT_FIELD_KIND | SHARDOPT_OPT_FIELD_LR;
    o.kind = SHARDOPT_ADAM;
    CHECK_ERR(shardopt_optimizer_create(c, p, &o, &s, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT,
              "field_mask has SHARDOPT_OPT_FIELD_LR but struct_size");
    o.field_mask = SHARDOPT_OPT_FIELD_KIND; /* an older struct holding only kind: fine */
    CHECK_OK(shardopt_optimizer_create(c, p, &o, &s, NULL, &opt));
    CHECK_OK(shardopt_optimizer_destroy(opt));
    opt = NULL;
    o.struct_size = offsetof(shardopt_optimizer_options, field_mask); /* no room for field_mask */
    CHECK_ERR(shardopt_optimizer_create(c, p, &o, &s, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT, "too small");
    /* after _init every bit is set; clearing the bit of a non-zero field is an error... */
    CHECK_OK(shardopt_optimizer_options_init(&o));
    o.field_mask &= ~(uint64_t)SHARDOPT_OPT_FIELD_BETA1;
    CHECK_ERR(shardopt_optimizer_create(c, p, &o, &s, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT,
              "beta1 is set but SHARDOPT_OPT_FIELD_BETA1");
    /* ...of a zero field, it is the default */
    CHECK_OK(shardopt_optimizer_options_init(&o));
    o.field_mask &= ~(uint64_t)SHARDOPT_OPT_FIELD_AMSGRAD;
    CHECK_OK(shardopt_optimizer_create(c, p, &o, &s, NULL, &opt));
    CHECK_OK(shardopt_optimizer_destroy(opt));
    opt = NULL;
    /* values are still validated */
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.field_mask = SHARDOPT_OPT_FIELD_MOMENTUM;
    o.momentum = -0.5;
    CHECK_ERR(shardopt_optimizer_create(c, p, &o, &s, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT, "momentum");
    CHECK(opt == NULL);
    CHECK_OK(shardopt_params_destroy(p));
    CHECK_OK(shardopt_comm_destroy(c));
}

static int bowl(void *user_data, const void *params, void *grad, const int64_t *samples, size_t sample_count,
                double *loss) {
    const float *p = (const float *)params;
    float *g = (float *)grad;
    double l = 0;
    int i;
    (void)user_data;
    (void)samples;
    (void)sample_count;
    for (i = 0; i < N; ++i) {
        g[i] = p[i] - 1.f;
        l += 0.5 * (double)g[i] * (double)g[i];
    }
    *loss = l;
    return 0;
}

/* Zeroed optimize options: one epoch of the whole data set (num_samples has no default). */
static void test_optimize_defaults(void) {
    shardopt_comm c = NULL;
    shardopt_params p = make_params_a6_b3();
    shardopt_optimizer_options o = {.struct_size = sizeof o};
    shardopt_sharding_options s = {.struct_size = sizeof s};
    shardopt_optimize_options oo = {.struct_size = sizeof oo};
    shardopt_optimize_result r = {.struct_size = sizeof r};
    shardopt_optimizer opt = NULL;
    CHECK_OK(shardopt_comm_create_inprocess(1, &c));
    CHECK_OK(shardopt_optimizer_create(c, p, &o, &s, initial, &opt));
    CHECK_ERR(shardopt_optimizer_optimize(opt, bowl, NULL, &oo, &r), SHARDOPT_ERR_INVALID_ARGUMENT,
              "num_samples must be > 0");
    oo.num_samples = 8;
    CHECK_OK(shardopt_optimizer_optimize(opt, bowl, NULL, &oo, &r));
    CHECK(r.loss_history_count == 1 && r.iterations == 1 && r.stopped_early == 0);
    CHECK_OK(shardopt_optimizer_destroy(opt));
    CHECK_OK(shardopt_params_destroy(p));
    CHECK_OK(shardopt_comm_destroy(c));
}

/* Issue 37's rules through the C ABI: Lion, NAdam, Adamax and Adadelta train (one step moves the
 * parameters); 8-bit and 4-bit Adam state trains and costs its codes and block scales (a tensor of
 * 5000 elements: 20 or 40 blocks); Adafactor and Muon create. */
static void test_new_rules(void) {
    shardopt_comm c = NULL;
    shardopt_params p = make_params_a6_b3();
    shardopt_sharding_options s = {.struct_size = sizeof s};
    shardopt_step_result r = {.struct_size = sizeof r};
    const shardopt_optimizer_kind runs[] = {SHARDOPT_LION, SHARDOPT_NADAM, SHARDOPT_ADAMAX, SHARDOPT_ADADELTA};
    CHECK_OK(shardopt_comm_create_inprocess(1, &c));
    s.strategy = SHARDOPT_ZERO2;
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; ++k) {
        shardopt_optimizer_options o;
        shardopt_optimizer opt = NULL;
        float *g = NULL, now[N];
        size_t n = 0;
        CHECK_OK(shardopt_optimizer_options_defaults(runs[k], &o));
        CHECK_OK(shardopt_optimizer_create(c, p, &o, &s, initial, &opt));
        CHECK_OK(shardopt_optimizer_zero_grad(opt));
        CHECK_OK(shardopt_optimizer_bucket_grad(opt, 0, (void **)&g, &n));
        for (size_t i = 0; i < n; ++i) g[i] = 0.5f;
        CHECK_OK(shardopt_optimizer_step(opt, &r));
        CHECK_OK(shardopt_optimizer_get_parameters(opt, now, N));
        CHECK(r.applied == 1 && now[0] < initial[0]); /* a positive gradient lowers the parameter */
        CHECK_OK(shardopt_optimizer_destroy(opt));
    }
    shardopt_optimizer_options o;
    shardopt_optimizer opt = NULL;
    CHECK_OK(shardopt_optimizer_options_defaults(SHARDOPT_MUON, &o)); /* AdamW on these vectors */
    CHECK_OK(shardopt_optimizer_create(c, p, &o, &s, initial, &opt));
    CHECK_OK(shardopt_optimizer_destroy(opt));
    opt = NULL;
    CHECK_OK(shardopt_optimizer_options_defaults(SHARDOPT_ADAFACTOR, &o)); /* its vectors: one variance each */
    CHECK_OK(shardopt_optimizer_create(c, p, &o, &s, initial, &opt));
    CHECK_OK(shardopt_optimizer_destroy(opt));
    opt = NULL;
    CHECK(opt == NULL);
    CHECK_OK(shardopt_params_destroy(p));
    for (int bits = 8; bits >= 4; bits -= 4) {
        shardopt_memory_stats m = {.struct_size = sizeof m};
        static float big[5000];
        float *g = NULL;
        size_t n = 0;
        CHECK_OK(shardopt_params_create(SHARDOPT_F32, 0, &p));
        CHECK_OK(shardopt_params_add(p, "w", 5000, 0, NULL));
        CHECK_OK(shardopt_optimizer_options_init(&o));
        o.state_precision = bits == 8 ? SHARDOPT_STATE_8BIT : SHARDOPT_STATE_4BIT;
        for (size_t i = 0; i < 5000; ++i) big[i] = 1.0f;
        CHECK_OK(shardopt_optimizer_create(c, p, &o, &s, big, &opt));
        CHECK_OK(shardopt_optimizer_memory_stats(opt, &m));
        CHECK(m.optimizer_state_bytes == (bits == 8 ? 2 * (5000 + 20 * 4) : 2 * (2500 + 40 * 4)));
        CHECK_OK(shardopt_optimizer_zero_grad(opt));
        CHECK_OK(shardopt_optimizer_bucket_grad(opt, 0, (void **)&g, &n));
        for (size_t i = 0; i < n; ++i) g[i] = 0.5f;
        CHECK_OK(shardopt_optimizer_step(opt, &r));
        CHECK_OK(shardopt_optimizer_get_parameters(opt, big, 5000));
        CHECK(r.applied == 1 && big[0] < 1.0f && big[4999] == big[0]);
        CHECK_OK(shardopt_optimizer_destroy(opt));
        CHECK_OK(shardopt_params_destroy(p));
        opt = NULL;
    }
    CHECK_OK(shardopt_comm_destroy(c));
}

void test_defaults(void) {
    test_new_rules();
    test_zeroed_equals_init();
    test_switches();
    test_field_mask();
    test_optimize_defaults();
}

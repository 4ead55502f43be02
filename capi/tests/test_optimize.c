/* optimize() with a C model callback on 2 ranks: a quadratic bowl that must be found; option and
 * result errors; a failing callback stops every rank. */
#define SHARDOPT_EXPERIMENTAL /* shardopt_model_error */
#include <math.h>
#include <string.h>

#include "harness.h"
#include "tests.h"

#define N 5

struct bowl {
    int calls;
    int fail_on_rank; /* -1: never */
    int rank;
    const char *reason; /* given with shardopt_model_error when failing; NULL: none */
};

/* loss = 0.5 * |p - target|^2 with target[i] = i + 1, for every sample. */
static int bowl_model(void *user_data, const void *params, void *grad, const int64_t *samples, size_t sample_count,
                      double *loss) {
    struct bowl *b = (struct bowl *)user_data;
    const float *p = (const float *)params;
    float *g = (float *)grad;
    double l = 0;
    int i;
    (void)samples;
    ++b->calls;
    if (b->rank == b->fail_on_rank) {
        if (b->reason) shardopt_model_error(b->reason);
        return -1;
    }
    if (sample_count == 0) return 1;
    for (i = 0; i < N; ++i) {
        const double d = p[i] - (i + 1.0);
        g[i] = (float)d;
        l += 0.5 * d * d;
    }
    *loss = l;
    return 0;
}

static shardopt_optimizer make_opt(shardopt_comm comm) {
    shardopt_params p = NULL;
    shardopt_optimizer_options o;
    shardopt_sharding_options s;
    shardopt_optimizer opt = NULL;
    CHECK_OK(shardopt_params_create(SHARDOPT_F32, 0, &p));
    CHECK_OK(shardopt_params_add(p, "w", N, 0, NULL));
    CHECK_OK(shardopt_optimizer_options_defaults(SHARDOPT_SGD, &o));
    o.lr = 0.5;
    CHECK_OK(shardopt_sharding_options_init(&s));
    s.strategy = SHARDOPT_ZERO1;
    CHECK_OK(shardopt_optimizer_create(comm, p, &o, &s, NULL, &opt));
    CHECK_OK(shardopt_params_destroy(p));
    return opt;
}

static void optimize_rank(shardopt_comm comm, int rank, void *arg) {
    shardopt_optimizer opt = make_opt(comm);
    shardopt_optimize_options oo;
    shardopt_optimize_result r;
    struct bowl b = {0, -1, 0, NULL};
    float best[N];
    double history[4];
    int i, ok = 1;
    (void)arg;
    b.rank = rank;
    CHECK_OK(shardopt_optimize_options_init(&oo));
    oo.num_samples = 64;
    oo.batch_size = 16;
    oo.epochs = 6;
    r.struct_size = sizeof r;
    r.best_parameters = best;
    r.best_parameters_count = N;
    r.loss_history = history;
    r.loss_history_capacity = 4; /* fewer than the epochs: only 4 are written */

    CHECK_ERR(shardopt_optimizer_optimize(opt, NULL, &b, &oo, &r), SHARDOPT_ERR_INVALID_ARGUMENT, "model is NULL");
    CHECK_ERR(shardopt_optimizer_optimize(opt, bowl_model, &b, NULL, &r), SHARDOPT_ERR_INVALID_ARGUMENT,
              "optimize options is NULL");
    oo.num_samples = 0;
    CHECK_ERR(shardopt_optimizer_optimize(opt, bowl_model, &b, &oo, &r), SHARDOPT_ERR_INVALID_ARGUMENT,
              "num_samples must be > 0");
    oo.num_samples = 64;
    r.best_parameters_count = 3;
    CHECK_ERR(shardopt_optimizer_optimize(opt, bowl_model, &b, &oo, &r), SHARDOPT_ERR_INVALID_ARGUMENT,
              "best_parameters_count is 3");
    r.best_parameters_count = N;
    r.struct_size = 0;
    CHECK_ERR(shardopt_optimizer_optimize(opt, bowl_model, &b, &oo, &r), SHARDOPT_ERR_INVALID_ARGUMENT,
              "struct_size is not set");
    r.struct_size = sizeof r;
    CHECK(b.calls == 0);

    CHECK_OK(shardopt_optimizer_optimize(opt, bowl_model, &b, &oo, &r));
    CHECK(b.calls == 6 * 4);
    CHECK(r.loss_history_count == 6 && r.iterations == 24 && r.stopped_early == 0);
    CHECK(history[3] < history[0]);
    for (i = 0; i < N; ++i) ok &= fabsf(best[i] - (float)(i + 1)) < 1e-3f;
    CHECK(ok);
    CHECK(r.best_loss < 1e-6);
    /* result may be NULL */
    CHECK_OK(shardopt_optimizer_optimize(opt, bowl_model, &b, &oo, NULL));
    CHECK_OK(shardopt_optimizer_destroy(opt));
}

/* The callback fails on rank 1: optimize fails there and on rank 0 (communicator aborted). */
static void failing_rank(shardopt_comm comm, int rank, void *arg) {
    shardopt_optimizer opt = make_opt(comm);
    shardopt_optimize_options oo;
    struct bowl b = {0, 1, 0, NULL};
    b.rank = rank;
    b.reason = (const char *)arg;
    CHECK_OK(shardopt_optimize_options_init(&oo));
    oo.num_samples = 8;
    CHECK_ERR(shardopt_optimizer_optimize(opt, bowl_model, &b, &oo, NULL), SHARDOPT_ERR_INVALID_STATE,
              "model callback returned");
    if (arg) { /* every rank names the failing rank and its reason */
        CHECK(strstr(shardopt_last_error_message(), "on rank 1: ValueError: bad batch") != NULL);
    }
    CHECK_OK(shardopt_optimizer_destroy(opt));
}

/* The model callback may read the optimizer whose loop runs it, but not change it or run its
 * collectives: refused, and the loop goes on (destroying it there freed the buffers in use). */
static int reentrant_model(void *user_data, const void *params, void *grad, const int64_t *samples,
                           size_t sample_count, double *loss) {
    shardopt_optimizer opt = *(shardopt_optimizer *)user_data;
    shardopt_step_result r;
    (void)params, (void)samples, (void)sample_count;
    memset(grad, 0, N * sizeof(float));
    r.struct_size = sizeof r;
    CHECK_ERR(shardopt_optimizer_step(opt, &r), SHARDOPT_ERR_INVALID_STATE, "inside this optimizer's training loop");
    CHECK_ERR(shardopt_optimizer_destroy(opt), SHARDOPT_ERR_INVALID_STATE, "inside this optimizer's training loop");
    { /* reading is fine: the learning rate, the layout */
        double lr = 0;
        size_t count = 0;
        CHECK_OK(shardopt_optimizer_learning_rate(opt, &lr));
        CHECK_OK(shardopt_optimizer_element_count(opt, &count, NULL));
        CHECK(lr == 0.5 && count == N);
    }
    *loss = 1.0;
    return 0;
}

static void reentrant_rank(shardopt_comm comm, int rank, void *arg) {
    shardopt_optimizer opt = make_opt(comm);
    shardopt_optimize_options oo;
    int64_t steps = 0;
    (void)rank, (void)arg;
    memset(&oo, 0, sizeof oo);
    oo.struct_size = sizeof oo;
    oo.num_samples = 4;
    CHECK_OK(shardopt_optimizer_optimize(opt, reentrant_model, &opt, &oo, NULL));
    CHECK_OK(shardopt_optimizer_step_count(opt, &steps)); /* usable again once the loop returned */
    CHECK(steps == 1);
    CHECK_OK(shardopt_optimizer_destroy(opt));
}

/* A loss of NaN stops optimize on every rank, naming the epoch and iteration. */
static int nan_model(void *user_data, const void *params, void *grad, const int64_t *samples, size_t sample_count,
                     double *loss) {
    (void)user_data, (void)params, (void)grad, (void)samples, (void)sample_count;
    *loss = NAN;
    return 0;
}

static void nan_rank(shardopt_comm comm, int rank, void *arg) {
    shardopt_optimizer opt = make_opt(comm);
    shardopt_optimize_options oo;
    (void)rank, (void)arg;
    memset(&oo, 0, sizeof oo);
    oo.struct_size = sizeof oo;
    oo.num_samples = 8;
    CHECK_ERR(shardopt_optimizer_optimize(opt, nan_model, NULL, &oo, NULL), SHARDOPT_ERR_INVALID_STATE,
              "the training loss is NaN at epoch 1, step 1");
    oo.first_epoch = -1;
    CHECK_ERR(shardopt_optimizer_optimize(opt, nan_model, NULL, &oo, NULL), SHARDOPT_ERR_INVALID_ARGUMENT,
              "first_epoch must be >= 0");
    CHECK_OK(shardopt_optimizer_destroy(opt));
}

void test_optimize(void) {
    run_ranks(2, optimize_rank, NULL);
    run_ranks(2, failing_rank, NULL);
    run_ranks(2, failing_rank, (void *)"ValueError: bad batch");
    run_ranks(2, nan_rank, NULL);
    run_ranks(2, reentrant_rank, NULL);
}

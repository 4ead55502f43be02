/* Asynchronous SGD through the C ABI: the strategy SHARDOPT_ASYNC_SGD with async_staleness, trained
 * by shardopt_optimizer_optimize on 4 in-process ranks. At staleness 0 it ends with DDP's
 * parameters bit for bit; at staleness 2 every rank ends with the same parameters; its checkpoint
 * loads into DDP; the step protocol and bad options are refused. */
#include <string.h>

#include "harness.h"
#include "tests.h"

#define RANKS 4
#define W 6 /* linear least squares: y = x . w_true, 6 weights */
#define SAMPLES 96

/* loss = mean over the samples of 0.5 (x . w - y)^2, with x and y made from the sample index. */
static int linear_model(void *user_data, const void *params, void *grad, const int64_t *samples, size_t n,
                        double *loss) {
    const double *w = (const double *)params;
    double *g = (double *)grad;
    double l = 0;
    size_t s;
    int i;
    (void)user_data;
    for (s = 0; s < n; ++s) {
        double x[W], pred = 0, y = 0, d;
        for (i = 0; i < W; ++i) {
            x[i] = (double)((samples[s] * (i + 3)) % 7) - 3.0;
            pred += x[i] * w[i];
            y += x[i] * (0.5 * i - 1.0);
        }
        d = pred - y;
        l += 0.5 * d * d;
        for (i = 0; i < W; ++i) g[i] += d * x[i] / (double)n;
    }
    *loss = n ? l / (double)n : 0.0;
    return 0;
}

struct async_run {
    shardopt_strategy strategy;
    int staleness;
    double params[RANKS][W];
    void *bytes;  /* rank 0's serialized checkpoint (freed by the caller) */
    size_t size;
    int64_t steps;
    double history[4]; /* rank 0's loss per epoch */
};

static shardopt_optimizer make_opt(shardopt_comm comm, shardopt_strategy strategy, int staleness) {
    shardopt_params p = NULL;
    shardopt_optimizer_options o;
    shardopt_sharding_options s;
    shardopt_optimizer opt = NULL;
    const double initial[W] = {0, 0, 0, 0, 0, 0};
    CHECK_OK(shardopt_params_create(SHARDOPT_F64, 0, &p));
    CHECK_OK(shardopt_params_add(p, "w", W, 0, NULL));
    CHECK_OK(shardopt_optimizer_options_defaults(SHARDOPT_ADAM, &o));
    o.lr = 0.05;
    CHECK_OK(shardopt_sharding_options_init(&s));
    CHECK(s.async_staleness == 0);
    s.strategy = strategy;
    s.async_staleness = staleness;
    CHECK_OK(shardopt_optimizer_create(comm, p, &o, &s, initial, &opt));
    CHECK_OK(shardopt_params_destroy(p));
    return opt;
}

static void train_rank(shardopt_comm comm, int rank, void *arg) {
    struct async_run *run = (struct async_run *)arg;
    shardopt_optimizer opt = make_opt(comm, run->strategy, run->staleness);
    shardopt_optimize_options oo;
    shardopt_optimize_result r;
    CHECK_OK(shardopt_optimize_options_init(&oo));
    oo.num_samples = SAMPLES;
    oo.batch_size = 16;
    oo.epochs = 4;
    oo.shuffle = SHARDOPT_ENABLE;
    memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    if (rank == 0) {
        r.loss_history = run->history;
        r.loss_history_capacity = 4;
    }
    CHECK_OK(shardopt_optimizer_optimize(opt, linear_model, NULL, &oo, &r));
    CHECK(r.iterations == 4 * SAMPLES / 16);
    CHECK_OK(shardopt_optimizer_get_parameters(opt, run->params[rank], W));
    if (rank == 0) CHECK_OK(shardopt_optimizer_step_count(opt, &run->steps));
    {
        void *bytes = NULL;
        size_t size = 0;
        CHECK_OK(shardopt_optimizer_serialize(opt, &bytes, &size));
        if (rank == 0) {
            run->bytes = bytes;
            run->size = size;
        } else {
            shardopt_buffer_free(bytes);
        }
    }
    CHECK_OK(shardopt_optimizer_destroy(opt));
}

static void load_into_ddp(shardopt_comm comm, int rank, void *arg) {
    struct async_run *run = (struct async_run *)arg;
    shardopt_optimizer opt = make_opt(comm, SHARDOPT_DDP, 0);
    double p[W];
    int64_t steps = 0;
    (void)rank;
    CHECK_OK(shardopt_optimizer_deserialize(opt, run->bytes, run->size));
    CHECK_OK(shardopt_optimizer_get_parameters(opt, p, W));
    CHECK(memcmp(p, run->params[0], sizeof p) == 0);
    CHECK_OK(shardopt_optimizer_step_count(opt, &steps));
    CHECK(steps == run->steps);
    CHECK_OK(shardopt_optimizer_destroy(opt));
}

static void refusals(shardopt_comm comm, int rank, void *arg) {
    shardopt_optimizer opt = make_opt(comm, SHARDOPT_ASYNC_SGD, 1);
    shardopt_params p = NULL;
    shardopt_optimizer_options o;
    shardopt_sharding_options s;
    shardopt_optimizer bad = NULL;
    double buffer[64];
    void *grad = NULL;
    (void)rank;
    (void)arg;
    CHECK_ERR(shardopt_optimizer_zero_grad(opt), SHARDOPT_ERR_UNSUPPORTED, "optimize()");
    CHECK_ERR(shardopt_optimizer_bucket_grad(opt, 0, &grad, NULL), SHARDOPT_ERR_UNSUPPORTED, "optimize()");
    CHECK_ERR(shardopt_optimizer_step(opt, NULL), SHARDOPT_ERR_UNSUPPORTED, "async_sgd");
    CHECK_OK(shardopt_optimizer_destroy(opt));
    /* Every rank refuses the same options at once (checked before anything collective). */
    CHECK_OK(shardopt_params_create(SHARDOPT_F64, 0, &p));
    CHECK_OK(shardopt_params_add(p, "w", W, 0, NULL));
    CHECK_OK(shardopt_optimizer_options_defaults(SHARDOPT_ADAM, &o));
    CHECK_OK(shardopt_sharding_options_init(&s));
    s.strategy = SHARDOPT_ASYNC_SGD;
    s.async_staleness = -1;
    CHECK_ERR(shardopt_optimizer_create(comm, p, &o, &s, NULL, &bad), SHARDOPT_ERR_INVALID_ARGUMENT, "async_staleness");
    CHECK_ERR(shardopt_sharding_options_validate(&s), SHARDOPT_ERR_INVALID_ARGUMENT, "async_staleness");
    s.async_staleness = 2;
    CHECK_OK(shardopt_sharding_options_validate(&s)); /* a staleness is a field of its own: valid */
    s.max_grad_norm = 1.0;
    CHECK_ERR(shardopt_optimizer_create(comm, p, &o, &s, NULL, &bad), SHARDOPT_ERR_UNSUPPORTED, "max_grad_norm");
    s.max_grad_norm = 0.0;
    s.compression = SHARDOPT_COMPRESSION_INT8;
    CHECK_ERR(shardopt_optimizer_create(comm, p, &o, &s, NULL, &bad), SHARDOPT_ERR_UNSUPPORTED, "compression");
    s.compression = SHARDOPT_COMPRESSION_NONE;
    CHECK_ERR(shardopt_optimizer_create_external(comm, p, &o, &s, NULL, buffer, 64, &bad), SHARDOPT_ERR_UNSUPPORTED,
              "async_sgd");
    s.strategy = SHARDOPT_DDP;
    CHECK_ERR(shardopt_optimizer_create(comm, p, &o, &s, NULL, &bad), SHARDOPT_ERR_INVALID_ARGUMENT,
              "async_sgd strategy only");
    s.strategy = (shardopt_strategy)7;
    CHECK_ERR(shardopt_optimizer_create(comm, p, &o, &s, NULL, &bad), SHARDOPT_ERR_INVALID_ARGUMENT, "invalid strategy");
    CHECK(bad == NULL);
    CHECK_OK(shardopt_params_destroy(p));
}

void test_async(void) {
    struct async_run ddp, async0, async2;
    int r;
    memset(&ddp, 0, sizeof ddp);
    memset(&async0, 0, sizeof async0);
    memset(&async2, 0, sizeof async2);
    ddp.strategy = SHARDOPT_DDP;
    async0.strategy = SHARDOPT_ASYNC_SGD;
    async2.strategy = SHARDOPT_ASYNC_SGD;
    async2.staleness = 2;
    run_ranks(RANKS, train_rank, &ddp);
    run_ranks(RANKS, train_rank, &async0);
    run_ranks(RANKS, train_rank, &async2);
    for (r = 0; r < RANKS; ++r) {
        CHECK(memcmp(async0.params[r], ddp.params[0], sizeof ddp.params[0]) == 0); /* staleness 0: DDP's bits */
        CHECK(memcmp(async2.params[r], async2.params[0], sizeof async2.params[0]) == 0);
    }
    CHECK(async2.history[3] < 0.5 * async2.history[0]); /* it trains */
    CHECK(memcmp(async0.history, ddp.history, sizeof ddp.history) == 0);
    CHECK(async2.steps == 4 * SAMPLES / 16);
    run_ranks(2, load_into_ddp, &async2); /* another strategy and world size */
    run_ranks(2, refusals, NULL);
    shardopt_buffer_free(ddp.bytes);
    shardopt_buffer_free(async0.bytes);
    shardopt_buffer_free(async2.bytes);
}

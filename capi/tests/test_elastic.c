/* Elastic optimizers through the ABI, with in-process ranks: a 3-rank job checkpointing every 2
 * steps is resumed by 2 ranks and ends equal, bit for bit, to a plain optimizer that saved at the
 * same step and was loaded by 2 ranks; optimize() after a resume skips what the checkpoint covers
 * and ends equal to an uninterrupted run; status fields; each error with its message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "tests.h"

#define N 9

struct job {
    char elastic[300], reference[300], fit[300], missing[300];
    float params[3][N];  /* rank r's final parameters: elastic, reference (step protocol) */
    float ref_params[3][N];
};

static shardopt_optimizer make_opt(shardopt_comm comm, shardopt_strategy strategy, shardopt_optimizer_kind kind) {
    shardopt_params p = make_params_a6_b3();
    shardopt_optimizer_options o;
    shardopt_sharding_options s;
    shardopt_optimizer opt = NULL;
    const float initial[N] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    CHECK_OK(shardopt_optimizer_options_defaults(kind, &o));
    CHECK_OK(shardopt_sharding_options_init(&s));
    s.strategy = strategy;
    CHECK_OK(shardopt_optimizer_create(comm, p, &o, &s, initial, &opt));
    CHECK_OK(shardopt_params_destroy(p));
    return opt;
}

static void make_elastic(shardopt_optimizer opt, const char *dir, int every) {
    shardopt_elastic_options e;
    CHECK_OK(shardopt_elastic_options_init(&e));
    e.min_workers = 2;
    e.max_workers = 3;
    e.checkpoint_every = every;
    e.checkpoint_dir = dir;
    CHECK_OK(shardopt_optimizer_make_elastic(opt, &e));
}

/* One step on a gradient that depends on the step and on the world size only. */
static void step(shardopt_optimizer opt, int rank, int size, int64_t s) {
    int b, buckets = 0;
    shardopt_step_result r;
    (void)rank;
    CHECK_OK(shardopt_optimizer_zero_grad(opt));
    CHECK_OK(shardopt_optimizer_bucket_count(opt, &buckets));
    for (b = 0; b < buckets; ++b) {
        float *g = NULL;
        size_t i, count = 0;
        CHECK_OK(shardopt_optimizer_bucket_grad(opt, b, (void **)&g, &count));
        for (i = 0; i < count; ++i) g[i] = 0.1f * (float)size * (float)((s + (int64_t)i + b) % 5 - 2);
        CHECK_OK(shardopt_optimizer_grad_ready(opt, b));
    }
    memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    CHECK_OK(shardopt_optimizer_step(opt, &r));
}

static shardopt_elastic_status status_of(shardopt_optimizer opt) {
    shardopt_elastic_status st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    CHECK_OK(shardopt_optimizer_elastic_status(opt, &st));
    return st;
}

/* 3 ranks: 5 steps, checkpoints at 2 and 4; a plain twin saves at 4 synchronously. */
static void first_job(shardopt_comm comm, int rank, void *arg) {
    struct job *j = (struct job *)arg;
    shardopt_optimizer e = make_opt(comm, SHARDOPT_ZERO2, SHARDOPT_ADAM);
    shardopt_optimizer plain = make_opt(comm, SHARDOPT_ZERO2, SHARDOPT_ADAM);
    shardopt_elastic_options bad;
    shardopt_elastic_status st;
    int64_t s;

    /* Errors first: none changes anything. */
    CHECK_ERR(shardopt_optimizer_make_elastic(NULL, NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "optimizer handle is NULL");
    CHECK_ERR(shardopt_optimizer_make_elastic(e, NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "elastic options is NULL");
    CHECK_OK(shardopt_elastic_options_init(&bad));
    bad.checkpoint_dir = j->elastic;
    bad.min_workers = 3;
    bad.max_workers = 2;
    CHECK_ERR(shardopt_optimizer_make_elastic(e, &bad), SHARDOPT_ERR_INVALID_ARGUMENT, "maxWorkers 2 is below minWorkers 3");
    CHECK_ERR(shardopt_elastic_options_validate(&bad), SHARDOPT_ERR_INVALID_ARGUMENT, "maxWorkers 2 is below minWorkers 3");
    bad.min_workers = 4;
    bad.max_workers = 8;
    CHECK_OK(shardopt_elastic_options_validate(&bad)); /* the world size is make_elastic's to check */
    CHECK_ERR(shardopt_optimizer_make_elastic(e, &bad), SHARDOPT_ERR_INVALID_STATE,
              "the world has 3 ranks, outside [minWorkers 4, maxWorkers 8]");
    bad.min_workers = 1;
    bad.checkpoint_every = -1;
    CHECK_ERR(shardopt_optimizer_make_elastic(e, &bad), SHARDOPT_ERR_INVALID_ARGUMENT, "checkpoint_every is -1");
    CHECK_ERR(shardopt_elastic_options_validate(&bad), SHARDOPT_ERR_INVALID_ARGUMENT, "checkpoint_every is -1");
    bad.struct_size = 4;
    CHECK_ERR(shardopt_optimizer_make_elastic(e, &bad), SHARDOPT_ERR_INVALID_ARGUMENT, "struct_size 4 is too small");
    CHECK_ERR(shardopt_optimizer_elastic_status(e, &st), SHARDOPT_ERR_INVALID_STATE, "not elastic");
    CHECK_ERR(shardopt_optimizer_checkpoint_now(e), SHARDOPT_ERR_INVALID_STATE, "not elastic");
    CHECK_ERR(shardopt_optimizer_finish_checkpoint(plain), SHARDOPT_ERR_INVALID_STATE, "not elastic");

    make_elastic(e, j->elastic, 2);
    CHECK_ERR(shardopt_optimizer_make_elastic(e, &bad), SHARDOPT_ERR_INVALID_STATE, "already elastic");
    st = status_of(e);
    CHECK(st.resumed_step == -1 && st.last_checkpoint_step == -1 && st.checkpoint_pending == 0);
    CHECK(st.min_workers == 2 && st.max_workers == 3 && st.checkpoint_every == 2 && st.generation == 0);
    CHECK(st.checkpoint_dir != NULL && strcmp(st.checkpoint_dir, j->elastic) == 0);
    for (s = 0; s < 5; ++s) {
        step(e, rank, 3, s);
        step(plain, rank, 3, s);
        if (s + 1 == 4) CHECK_OK(shardopt_optimizer_save(plain, j->reference, SHARDOPT_CHECKPOINT_SHARDED));
    }
    CHECK_OK(shardopt_optimizer_finish_checkpoint(e));
    st = status_of(e);
    CHECK(st.last_checkpoint_step == 4 && st.checkpoint_pending == 0 && st.checkpoints_published == 2);
    CHECK(st.snapshot_bytes > 0 && st.snapshot_seconds >= 0 && st.write_seconds > 0);
    CHECK_OK(shardopt_optimizer_destroy(e));
    CHECK_OK(shardopt_optimizer_destroy(plain));
}

/* 2 ranks: the elastic job resumes at 4 and runs to 8; the reference loads the plain save. */
static void second_job(shardopt_comm comm, int rank, void *arg) {
    struct job *j = (struct job *)arg;
    shardopt_optimizer e = make_opt(comm, SHARDOPT_ZERO2, SHARDOPT_ADAM);
    shardopt_optimizer ref = make_opt(comm, SHARDOPT_ZERO2, SHARDOPT_ADAM);
    shardopt_elastic_status st;
    int64_t s, steps = 0;
    make_elastic(e, j->elastic, 2);
    st = status_of(e);
    CHECK(st.resumed_step == 4 && st.last_checkpoint_step == 4);
    CHECK_OK(shardopt_optimizer_step_count(e, &steps));
    CHECK(steps == 4);
    CHECK_OK(shardopt_optimizer_load(ref, j->reference));
    for (s = steps; s < 8; ++s) {
        step(e, rank, 2, s);
        step(ref, rank, 2, s);
    }
    CHECK_OK(shardopt_optimizer_checkpoint_now(e)); /* at 8 again: taken, then finished */
    CHECK_OK(shardopt_optimizer_finish_checkpoint(e));
    CHECK(status_of(e).last_checkpoint_step == 8);
    CHECK_OK(shardopt_optimizer_get_parameters(e, j->params[rank], N));
    CHECK_OK(shardopt_optimizer_get_parameters(ref, j->ref_params[rank], N));
    CHECK(memcmp(j->params[rank], j->ref_params[rank], sizeof j->params[rank]) == 0);
    CHECK_OK(shardopt_optimizer_destroy(e));
    CHECK_OK(shardopt_optimizer_destroy(ref));
}

/* loss = 0.5 * |p - t|^2 with t[i] = i + sample: each batch pulls elsewhere. */
static int pull_model(void *user_data, const void *params, void *grad, const int64_t *samples, size_t n, double *loss) {
    const float *p = (const float *)params;
    float *g = (float *)grad;
    double l = 0;
    size_t k;
    int i;
    (void)user_data;
    for (k = 0; k < n; ++k)
        for (i = 0; i < N; ++i) {
            const double d = p[i] - (double)(i + samples[k]);
            g[i] += (float)(d / (double)n);
            l += 0.5 * d * d / (double)n;
        }
    *loss = l;
    return 0;
}

struct fit {
    const char *dir;
    int64_t max_iterations; /* 0: all */
    int elastic;
    float *out; /* rank 0's final parameters */
    size_t history;
    int64_t iterations;
};

static void fit_rank(shardopt_comm comm, int rank, void *arg) {
    struct fit *f = (struct fit *)arg;
    shardopt_optimizer opt = make_opt(comm, SHARDOPT_FSDP, SHARDOPT_ADAM);
    shardopt_optimize_options oo;
    shardopt_optimize_result r;
    double history[4];
    float params[N];
    if (f->elastic) make_elastic(opt, f->dir, 5);
    CHECK_OK(shardopt_optimize_options_init(&oo));
    oo.num_samples = 8;
    oo.batch_size = 2; /* 4 iterations per epoch */
    oo.epochs = 3;
    oo.max_iterations = f->max_iterations;
    memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    r.loss_history = history;
    r.loss_history_capacity = 4;
    CHECK_OK(shardopt_optimizer_optimize(opt, pull_model, NULL, &oo, &r));
    if (f->elastic) CHECK_OK(shardopt_optimizer_finish_checkpoint(opt));
    CHECK_OK(shardopt_optimizer_get_parameters(opt, params, N)); /* collective under FSDP */
    if (rank == 0) {
        memcpy(f->out, params, sizeof params);
        f->history = r.loss_history_count;
        f->iterations = r.iterations;
    }
    CHECK_OK(shardopt_optimizer_destroy(opt));
}

void test_elastic(void) {
    struct job j;
    struct fit f;
    float straight[N], resumed[N];
    char dir[256], command[300];
    snprintf(dir, sizeof dir, "/tmp/shardopt-capi-elastic-XXXXXX");
    if (!mkdtemp(dir)) {
        CHECK(0 && "mkdtemp");
        return;
    }
    memset(&j, 0, sizeof j);
    snprintf(j.elastic, sizeof j.elastic, "%s/elastic", dir);
    snprintf(j.reference, sizeof j.reference, "%s/reference", dir);
    snprintf(j.fit, sizeof j.fit, "%s/fit", dir);
    run_ranks(3, first_job, &j);
    run_ranks(2, second_job, &j);

    /* optimize(): 12 iterations straight, against 10 then a resumed run of the 12 (2 ranks). */
    memset(&f, 0, sizeof f);
    f.out = straight;
    run_ranks(2, fit_rank, &f);
    CHECK(f.iterations == 12 && f.history == 3);
    f.dir = j.fit;
    f.elastic = 1;
    f.max_iterations = 10;
    f.out = resumed;
    run_ranks(2, fit_rank, &f); /* checkpoints at 5 and 10 */
    CHECK(f.iterations == 10);
    f.max_iterations = 0;
    run_ranks(2, fit_rank, &f); /* resumes at 10: skips 2 epochs and half of the third */
    CHECK(f.iterations == 12 && f.history == 1);
    CHECK(memcmp(straight, resumed, sizeof straight) == 0);

    snprintf(command, sizeof command, "rm -rf '%s'", dir);
    CHECK(system(command) == 0);
}

/* The conformance suite's C driver (README.md in this folder): every run of runs.txt through the
 * C ABI, in-process ranks on threads; a run with a `backend` key is one rank of a job launched by
 * shardopt-run (README.md, "Launched runs"). Usage: conformance_c RUNS_FILE [RUN_NAME...] */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardopt.h"

enum { FEATURES = 8, PARAMS = FEATURES + 1, TRAIN = 64, VALID = 32, TEST = 16, MAX_KEYS = 48, MAX_EPOCHS = 1024 };

/* ---- the model (README.md, "The model") ---- */
static double feature(int64_t r, int j) { return (double)((7 * r + 3 * j) % 11 - 5) / 8.0; }

static double target(int64_t r) {
    double acc = 0.0;
    for (int j = 0; j < FEATURES; ++j) acc += 0.125 * (double)(j + 1) * feature(r, j);
    return acc + 0.25 + (double)((37 * r) % 17 - 8) / 16.0;
}

typedef struct model_ctx {
    shardopt_dtype dtype;
} model_ctx;

static int model_fn(void *user, const shardopt_batch *b, double *loss_out) {
    const model_ctx *m = (const model_ctx *)user;
    const int64_t offset = b->dataset == SHARDOPT_DATASET_TRAINING ? 0 : b->dataset == SHARDOPT_DATASET_VALIDATION ? TRAIN : TRAIN + VALID;
    double p[PARAMS], gw[FEATURES] = {0}, gb = 0.0, loss = 0.0;
    for (int k = 0; k < PARAMS; ++k)
        p[k] = m->dtype == SHARDOPT_F32 ? (double)((const float *)b->params)[k] : ((const double *)b->params)[k];
    for (size_t s = 0; s < b->sample_count; ++s) {
        const int64_t r = offset + b->samples[s];
        double pred = 0.0;
        for (int j = 0; j < FEATURES; ++j) pred += p[j] * feature(r, j);
        const double err = pred + p[FEATURES] - target(r);
        loss += 0.5 * err * err;
        for (int j = 0; j < FEATURES; ++j) gw[j] += err * feature(r, j);
        gb += err;
    }
    const double n = (double)b->sample_count;
    if (b->grad) {
        for (int k = 0; k < PARAMS; ++k) {
            const double g = (k < FEATURES ? gw[k] : gb) / n;
            if (m->dtype == SHARDOPT_F32) ((float *)b->grad)[k] = (float)g;
            else ((double *)b->grad)[k] = g;
        }
    }
    *loss_out = loss / n;
    return 0;
}

static int custom_lr(void *user, int64_t t, double base, double *lr) {
    (void)user;
    *lr = base / (1.0 + (double)t / 2.0);
    return 0;
}

/* ---- the table ---- */
typedef struct run {
    char name[64];
    char keys[MAX_KEYS][32], values[MAX_KEYS][32];
    int count;
} run;

static const char *get(const run *r, const char *key) {
    for (int i = 0; i < r->count; ++i)
        if (strcmp(r->keys[i], key) == 0) return r->values[i];
    return NULL;
}

static int pick(const char *value, const char *const *names, int n, const char *what) {
    for (int i = 0; i < n; ++i)
        if (strcmp(value, names[i]) == 0) return i;
    fprintf(stderr, "unknown %s '%s'\n", what, value);
    exit(2);
}

static const char *const strategy_names[] = {"ddp", "zero1", "zero2", "fsdp", "hybrid", "local_sgd", "async_sgd"};
/* in shardopt_optimizer_preset's order: a name's index is its preset */
static const char *const optimizer_names[] = {"sgd",  "momentum",  "adam",  "adamw",  "rmsprop",  "adagrad", "lamb",
                                              "lion", "adafactor", "nadam", "adamax", "adadelta", "muon"};
static const char *const schedule_names[] = {"constant", "warmup", "cosine", "step_decay",
                                             "warmup_cosine", "warmup_step_decay", "custom"};
static const char *const preset_names[] = {"default", "high_bandwidth", "low_bandwidth"};

/* ---- one rank ---- */
typedef struct rank_job {
    const run *r;
    shardopt_comm comm;
    char *out;     /* what this rank prints */
    size_t out_cap;
    int failed;
} rank_job;

static void append(rank_job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#include <stdarg.h>
static void append(rank_job *j, const char *fmt, ...) {
    size_t used = strlen(j->out);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(j->out + used, j->out_cap - used, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= j->out_cap - used) {
        fprintf(stderr, "output buffer full\n");
        exit(2);
    }
}

static void append_doubles(rank_job *j, const char *word, const double *v, size_t n) {
    append(j, "%s", word);
    for (size_t i = 0; i < n; ++i) {
        uint64_t bits;
        memcpy(&bits, &v[i], sizeof bits);
        append(j, " %016llx", (unsigned long long)bits);
    }
    append(j, "\n");
}

static void append_params(rank_job *j, const char *word, const void *p, shardopt_dtype dtype) {
    double v[PARAMS];
    for (int k = 0; k < PARAMS; ++k) v[k] = dtype == SHARDOPT_F32 ? (double)((const float *)p)[k] : ((const double *)p)[k];
    append_doubles(j, word, v, PARAMS);
}

#define CHECK(call)                                                                                       \
    do {                                                                                                  \
        shardopt_status st_ = (call);                                                                     \
        if (st_ != SHARDOPT_OK) {                                                                         \
            fprintf(stderr, "run %s: %s failed: %s %s\n", j->r->name, #call, shardopt_status_name(st_),    \
                    shardopt_last_error_message());                                                       \
            j->failed = 1;                                                                                \
            goto done;                                                                                    \
        }                                                                                                 \
    } while (0)

static int create_optimizer(rank_job *j, shardopt_dtype dtype, shardopt_optimizer *opt) {
    const run *r = j->r;
    const char *v;
    shardopt_params params = NULL;
    shardopt_optimizer_options o;
    shardopt_sharding_options s;
    int ok = 0;
    CHECK(shardopt_optimizer_options_init_preset(&o, sizeof o,
                                                 (shardopt_optimizer_preset)pick(get(r, "optimizer"), optimizer_names,
                                                                                 (int)(sizeof optimizer_names / sizeof *optimizer_names),
                                                                                 "optimizer")));
    if ((v = get(r, "lr"))) o.lr = atof(v);
    v = get(r, "preset");
    CHECK(shardopt_sharding_options_init_preset(&s, sizeof s,
                                                (shardopt_sharding_preset)(v ? pick(v, preset_names, 3, "preset") : 0)));
    s.strategy = (shardopt_strategy)pick(get(r, "strategy"), strategy_names, 7, "strategy");
    if ((v = get(r, "config_lr"))) s.learning_rate = atof(v);
    if ((v = get(r, "group"))) s.parameter_group_size = atoll(v);
    if ((v = get(r, "data_strategy"))) s.hybrid_data_strategy = (shardopt_strategy)pick(v, strategy_names, 4, "data_strategy");
    if ((v = get(r, "local_steps"))) s.local_sgd_period = atoi(v);
    if ((v = get(r, "auto_sync")) && atoi(v) == 0) s.auto_sync_gradients = SHARDOPT_DISABLE;
    if ((v = get(r, "staleness"))) s.async_staleness = atoi(v);
    if ((v = get(r, "accumulation"))) s.gradient_accumulation_steps = atoi(v);
    if ((v = get(r, "memory"))) s.memory = strcmp(v, "cuda") == 0 ? SHARDOPT_MEMORY_CUDA : SHARDOPT_MEMORY_HOST;
    CHECK(shardopt_params_create(dtype, 0, &params));
    if ((v = get(r, "matrix"))) { /* weight declared as a ROWSxCOLS matrix (Muon, factored Adafactor) */
        size_t rows = 0, cols = 0;
        if (sscanf(v, "%zux%zu", &rows, &cols) != 2 || rows * cols != FEATURES) {
            fprintf(stderr, "run %s: matrix '%s' is not ROWSxCOLS of %d elements\n", r->name, v, FEATURES);
            j->failed = 1;
            goto done;
        }
        CHECK(shardopt_params_add_matrix(params, "weight", rows, cols, 0, NULL));
    } else {
        CHECK(shardopt_params_add(params, "weight", FEATURES, 0, NULL));
    }
    CHECK(shardopt_params_add(params, "bias", 1, 0, NULL));
    CHECK(shardopt_optimizer_create(j->comm, params, &o, &s, NULL, opt));
    ok = 1;
done:
    shardopt_params_destroy(params);
    return ok;
}

static void *rank_main(void *arg) {
    rank_job *j = (rank_job *)arg;
    const run *r = j->r;
    const char *v;
    const shardopt_dtype dtype = strcmp(get(r, "dtype"), "f32") == 0 ? SHARDOPT_F32 : SHARDOPT_F64;
    model_ctx m = {dtype};
    shardopt_optimizer opt = NULL;
    shardopt_training_options t;
    shardopt_training_result res;
    double train_h[MAX_EPOCHS], valid_h[MAX_EPOCHS], lr_h[MAX_EPOCHS];
    unsigned char best[PARAMS * 8], params[PARAMS * 8];
    int resume_after = (v = get(r, "resume_after")) ? atoi(v) : 0;

    if (!create_optimizer(j, dtype, &opt)) goto done;
    CHECK(shardopt_training_options_init(&t));
    t.num_samples = TRAIN;
    if (get(r, "validation")) t.num_validation_samples = VALID;
    if (get(r, "test")) t.num_test_samples = TEST;
    if ((v = get(r, "batch"))) t.batch_size = atoll(v);
    if ((v = get(r, "epochs"))) t.max_epochs = atoi(v);
    if ((v = get(r, "max_steps"))) t.max_steps = atoll(v);
    if ((v = get(r, "shuffle"))) t.shuffle = atoi(v);
    if ((v = get(r, "seed"))) t.seed = strtoull(v, NULL, 10);
    if ((v = get(r, "early_stopping"))) t.early_stopping = atoi(v);
    if ((v = get(r, "patience"))) t.patience = atoi(v);
    if ((v = get(r, "tolerance"))) t.tolerance = atof(v);
    if ((v = get(r, "schedule"))) t.lr_schedule = (shardopt_lr_schedule)pick(v, schedule_names, 7, "schedule");
    if (t.lr_schedule == SHARDOPT_LR_CUSTOM) t.lr_fn = custom_lr;
    if ((v = get(r, "per_step"))) t.lr_per_step = atoi(v);
    if ((v = get(r, "warmup"))) t.warmup = atoll(v);
    if ((v = get(r, "decay_period"))) t.decay_period = atoll(v);
    if ((v = get(r, "min_lr"))) t.min_lr = atof(v);
    if ((v = get(r, "gamma"))) t.gamma = atof(v);

    if (resume_after > 0) {
        shardopt_training_options first = t;
        void *bytes = NULL;
        size_t size = 0;
        first.max_epochs = resume_after;
        CHECK(shardopt_optimizer_train(opt, model_fn, &m, &first, NULL));
        CHECK(shardopt_optimizer_serialize(opt, &bytes, &size));
        shardopt_optimizer_destroy(opt);
        opt = NULL;
        if (!create_optimizer(j, dtype, &opt)) {
            shardopt_buffer_free(bytes);
            goto done;
        }
        shardopt_status st = shardopt_optimizer_deserialize(opt, bytes, size);
        shardopt_buffer_free(bytes);
        CHECK(st);
    }

    memset(&res, 0, sizeof res);
    res.struct_size = sizeof res;
    res.best_parameters = best;
    res.best_parameters_count = PARAMS;
    res.training_loss_history = train_h;
    res.validation_loss_history = valid_h;
    res.learning_rate_history = lr_h;
    res.history_capacity = MAX_EPOCHS;
    CHECK(shardopt_optimizer_train(opt, model_fn, &m, &t, &res));
    CHECK(shardopt_optimizer_get_parameters(opt, params, PARAMS));

    append(j, "run %s\n", r->name);
    append_params(j, "params", params, dtype);
    append_params(j, "best", best, dtype);
    append_doubles(j, "training", train_h, (size_t)res.epochs);
    append_doubles(j, "validation", valid_h, (size_t)res.epochs);
    append_doubles(j, "lr", lr_h, (size_t)res.epochs);
    append(j, "counts %d %lld %d %d\n", res.epochs, (long long)res.steps, res.best_epoch, res.stopped_early);
    {
        const double losses[4] = {res.best_score, res.training_loss, res.validation_loss, res.test_loss};
        append_doubles(j, "losses", losses, 4);
    }
    {
        shardopt_memory_space memory = SHARDOPT_MEMORY_HOST;
        CHECK(shardopt_optimizer_device(opt, &memory, NULL, NULL));
        if (memory == SHARDOPT_MEMORY_CUDA) append(j, "memory cuda\n");
    }
done:
    if (j->failed && j->comm) shardopt_comm_abort(j->comm, "a rank of the conformance run failed");
    shardopt_optimizer_destroy(opt);
    return NULL;
}

/* A launched run: this process is one rank of the job, its communicator the run's backend from
 * the launcher's environment; rank 0 prints. */
static int run_launched(const run *r) {
    rank_job j = {r, NULL, NULL, 1 << 16, 0};
    int rank = -1, size = 0;
    const shardopt_status made = shardopt_comm_create_from_env(get(r, "backend"), &j.comm);
    if (made != SHARDOPT_OK) {
        fprintf(stderr, "run %s: %s\n", r->name, shardopt_last_error_message());
        return made == SHARDOPT_ERR_UNSUPPORTED ? 77 : 1; /* 77: no GPU here (ctest's skip code) */
    }
    shardopt_comm_rank(j.comm, &rank);
    shardopt_comm_size(j.comm, &size);
    if (size != atoi(get(r, "ranks"))) {
        fprintf(stderr, "run %s: launched with %d ranks, the run has %s (shardopt-run -n %s)\n", r->name, size,
                get(r, "ranks"), get(r, "ranks"));
        shardopt_comm_destroy(j.comm);
        return 1;
    }
    j.out = calloc(1, j.out_cap);
    rank_main(&j);
    if (!j.failed && rank == 0) fputs(j.out, stdout);
    free(j.out);
    shardopt_comm_destroy(j.comm);
    return j.failed;
}

static int run_one(const run *r) {
    const int ranks = atoi(get(r, "ranks"));
    if (get(r, "backend")) return run_launched(r);
    shardopt_comm comms[8];
    pthread_t threads[8];
    rank_job jobs[8];
    int failed = 0;
    if (ranks < 1 || ranks > 8) {
        fprintf(stderr, "run %s: ranks must be 1..8\n", r->name);
        return 1;
    }
    if (shardopt_comm_create_inprocess(ranks, comms) != SHARDOPT_OK) {
        fprintf(stderr, "run %s: %s\n", r->name, shardopt_last_error_message());
        return 1;
    }
    for (int k = 0; k < ranks; ++k) {
        jobs[k].r = r;
        jobs[k].comm = comms[k];
        jobs[k].out_cap = 1 << 16;
        jobs[k].out = calloc(1, jobs[k].out_cap);
        jobs[k].failed = 0;
        pthread_create(&threads[k], NULL, rank_main, &jobs[k]);
    }
    for (int k = 0; k < ranks; ++k) pthread_join(threads[k], NULL);
    for (int k = 0; k < ranks; ++k) {
        failed |= jobs[k].failed;
        if (!jobs[k].failed && strcmp(jobs[k].out, jobs[0].out) != 0) {
            fprintf(stderr, "run %s: rank %d's results differ from rank 0's\n", r->name, k);
            failed = 1;
        }
    }
    if (!failed) fputs(jobs[0].out, stdout);
    for (int k = 0; k < ranks; ++k) {
        free(jobs[k].out);
        shardopt_comm_destroy(comms[k]);
    }
    return failed;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s RUNS_FILE [RUN_NAME...]\n", argv[0]);
        return 2;
    }
    FILE *f = fopen(argv[1], "r");
    if (!f) {
        perror(argv[1]);
        return 2;
    }
    char line[1024];
    int failed = 0;
    while (fgets(line, sizeof line, f)) {
        run r;
        memset(&r, 0, sizeof r);
        char *tok = strtok(line, " \t\r\n");
        if (!tok || tok[0] == '#') continue;
        snprintf(r.name, sizeof r.name, "%s", tok);
        while ((tok = strtok(NULL, " \t\r\n")) && r.count < MAX_KEYS) {
            char *eq = strchr(tok, '=');
            if (!eq) {
                fprintf(stderr, "run %s: '%s' is not key=value\n", r.name, tok);
                return 2;
            }
            *eq = '\0';
            snprintf(r.keys[r.count], sizeof r.keys[0], "%s", tok);
            snprintf(r.values[r.count], sizeof r.values[0], "%s", eq + 1);
            ++r.count;
        }
        if (argc > 2) {
            int wanted = 0;
            for (int a = 2; a < argc; ++a) wanted |= strcmp(argv[a], r.name) == 0;
            if (!wanted) continue;
        }
        failed |= run_one(&r);
        fflush(stdout);
    }
    fclose(f);
    return failed;
}

/* Experimental: pipeline parallelism with C callbacks. Two stages of a scalar chain model
 * (y = a x on stage 0; z = b y, loss = mean (z - t)^2 / 2 on stage 1) train under GPipe and 1F1B
 * to the parameters of the same SGD computed here in one process; a failing callback stops both
 * stages with its reason; bad arguments are refused. */
#define SHARDOPT_EXPERIMENTAL /* before the header: declares the experimental part */
#include <math.h>
#include <string.h>

#include "harness.h"
#include "tests.h"

#define SAMPLES 8
#define MICRO 2
#define STEPS 5
#define LR 0.05

static const double xs[SAMPLES] = {0.5, -1.0, 1.5, 2.0, -0.25, 0.75, 1.25, -1.5};

struct chain {
    shardopt_optimizer opt;
    int fail_backward; /* return this from backward (0: succeed) */
    shardopt_pipeline pipe;
    int misuse, refused; /* backward tries what would change the optimizer or the pipeline; refusals seen */
};

static double target(int i) { return 3.0 * xs[i]; }

static int forward(void *user, const shardopt_stage_call *call, const void *input, size_t input_count,
                   shardopt_activation output, double *loss) {
    struct chain *c = (struct chain *)user;
    const double *in = (const double *)input;
    double *p = NULL, *out = NULL, sum = 0;
    int k, first = call->micro_batch * (SAMPLES / MICRO);
    if (shardopt_optimizer_tensor_parameters(c->opt, 0, (void **)&p) != SHARDOPT_OK) return 1;
    if (call->first) { /* y = a x */
        if (shardopt_activation_resize(output, SAMPLES / MICRO, (void **)&out) != SHARDOPT_OK) return 2;
        for (k = 0; k < SAMPLES / MICRO; ++k) out[k] = p[0] * xs[first + k];
        return 0;
    }
    if (input_count != SAMPLES / MICRO) return 3;
    for (k = 0; k < SAMPLES / MICRO; ++k) {
        const double d = p[0] * in[k] - target(first + k);
        sum += 0.5 * d * d;
    }
    *loss = sum / (SAMPLES / MICRO);
    return 0;
}

static int backward(void *user, const shardopt_stage_call *call, const void *input, size_t input_count,
                    const void *output_grad, size_t output_grad_count, void *input_grad) {
    struct chain *c = (struct chain *)user;
    const double *in = (const double *)input, *dout = (const double *)output_grad;
    double *p = NULL, *g = NULL;
    size_t n = 0;
    int k, first = call->micro_batch * (SAMPLES / MICRO);
    if (c->fail_backward) {
        shardopt_model_error("the chain broke");
        return c->fail_backward;
    }
    if (c->misuse) { /* refused while the batch runs, changing nothing */
        c->refused += shardopt_optimizer_zero_grad(c->opt) == SHARDOPT_ERR_INVALID_STATE &&
                      strstr(shardopt_last_error_message(),
                             "not while a pipeline batch is running on this optimizer (called from a stage callback)");
        c->refused += shardopt_optimizer_destroy(c->opt) == SHARDOPT_ERR_INVALID_STATE;
        c->refused += shardopt_pipeline_run_batch(c->pipe, NULL) == SHARDOPT_ERR_INVALID_STATE;
        c->refused += shardopt_pipeline_destroy(c->pipe) == SHARDOPT_ERR_INVALID_STATE &&
                      strstr(shardopt_last_error_message(), "not while a batch of this pipeline is running");
    }
    if (shardopt_optimizer_tensor_parameters(c->opt, 0, (void **)&p) != SHARDOPT_OK) return 1;
    if (shardopt_stage_call_grad(call, 0, (void **)&g, &n) != SHARDOPT_OK || n != 1) return 2;
    if (call->first) { /* da += dy x */
        if (output_grad_count != SAMPLES / MICRO) return 3;
        for (k = 0; k < SAMPLES / MICRO; ++k) g[0] += dout[k] * xs[first + k];
        return 0;
    }
    for (k = 0; k < SAMPLES / MICRO; ++k) { /* dz = (b y - t) / n; db += dz y; dy = dz b */
        const double dz = (p[0] * in[k] - target(first + k)) / (SAMPLES / MICRO);
        g[0] += dz * in[k];
        ((double *)input_grad)[k] = dz * p[0];
    }
    (void)input_count;
    return 0;
}

/* The same training in one process. */
static void reference(double *a, double *b) {
    int step, m, k;
    *a = 0.5;
    *b = 0.5;
    for (step = 0; step < STEPS; ++step) {
        double ga = 0, gb = 0;
        for (m = 0; m < MICRO; ++m) {
            double ma = 0, mb = 0;
            for (k = 0; k < SAMPLES / MICRO; ++k) {
                const int i = m * (SAMPLES / MICRO) + k;
                const double y = *a * xs[i], dz = (*b * y - target(i)) / (SAMPLES / MICRO);
                mb += dz * y;
                ma += dz * *b * xs[i];
            }
            ga += ma;
            gb += mb;
        }
        *a -= LR * (ga / MICRO);
        *b -= LR * (gb / MICRO);
    }
}

static shardopt_optimizer make(shardopt_comm comm) {
    shardopt_params p = NULL;
    shardopt_optimizer_options o;
    shardopt_sharding_options s;
    shardopt_optimizer opt = NULL;
    int rank = 0;
    double init = 0.5;
    CHECK_OK(shardopt_comm_rank(comm, &rank));
    CHECK_OK(shardopt_params_create(SHARDOPT_F64, 0, &p));
    CHECK_OK(shardopt_params_add(p, rank == 0 ? "a" : "b", 1, 0, NULL));
    CHECK_OK(shardopt_optimizer_options_defaults(SHARDOPT_SGD, &o));
    o.lr = LR;
    CHECK_OK(shardopt_sharding_options_init(&s));
    s.strategy = SHARDOPT_HYBRID;
    s.pipeline_parallel_size = 2;
    CHECK_OK(shardopt_optimizer_create(comm, p, &o, &s, &init, &opt));
    CHECK_OK(shardopt_params_destroy(p));
    return opt;
}

static void pipeline_rank(shardopt_comm comm, int rank, void *arg) {
    shardopt_pipeline_schedule schedules[2] = {SHARDOPT_PIPELINE_GPIPE, SHARDOPT_PIPELINE_1F1B};
    struct chain c = {NULL, 0, NULL, 0, 0};
    shardopt_pipeline_stage stage = {sizeof stage, forward, backward, &c};
    shardopt_pipeline_options po = {sizeof po, MICRO, SHARDOPT_PIPELINE_1F1B, 0};
    shardopt_pipeline pipe = NULL;
    shardopt_pipeline_result r;
    double want_a, want_b, got = 0;
    int s, step;
    (void)arg;
    CHECK_OK(shardopt_comm_set_timeout(comm, 60000));
    reference(&want_a, &want_b);
    for (s = 0; s < 2; ++s) {
        c.opt = make(comm);
        po.schedule = schedules[s];
        CHECK_OK(shardopt_pipeline_create(c.opt, &stage, &po, &pipe));
        for (step = 0; step < STEPS; ++step) {
            r.struct_size = sizeof r;
            CHECK_OK(shardopt_pipeline_run_batch(pipe, &r));
            CHECK(r.step_applied == 1);
            CHECK(r.sends == MICRO && r.recvs == MICRO); /* activations one way, gradients back */
            CHECK(r.peak_activations == (schedules[s] == SHARDOPT_PIPELINE_GPIPE ? MICRO : 2 - rank));
            CHECK(r.loss > 0);
        }
        CHECK_OK(shardopt_optimizer_get_parameters(c.opt, &got, 1));
        CHECK(fabs(got - (rank == 0 ? want_a : want_b)) <= 1e-12);
        CHECK_OK(shardopt_pipeline_destroy(pipe));
        CHECK_OK(shardopt_optimizer_destroy(c.opt));
    }

    /* bad arguments */
    c.opt = make(comm);
    po.schedule = (shardopt_pipeline_schedule)9;
    CHECK_ERR(shardopt_pipeline_create(c.opt, &stage, &po, &pipe), SHARDOPT_ERR_INVALID_ARGUMENT, "invalid schedule 9");
    po.schedule = SHARDOPT_PIPELINE_1F1B;
    CHECK_ERR(shardopt_pipeline_create(c.opt, NULL, &po, &pipe), SHARDOPT_ERR_INVALID_ARGUMENT, "pipeline stage is NULL");
    stage.backward = NULL;
    CHECK_ERR(shardopt_pipeline_create(c.opt, &stage, &po, &pipe), SHARDOPT_ERR_INVALID_ARGUMENT,
              "forward and backward callbacks must both be set");
    stage.backward = backward;
    CHECK_ERR(shardopt_pipeline_run_batch(NULL, NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "pipeline handle is NULL");

    /* from a stage: changing the optimizer, destroying either, running a batch again: refused; the batch goes on */
    CHECK_OK(shardopt_pipeline_create(c.opt, &stage, &po, &c.pipe));
    c.misuse = 1;
    CHECK_OK(shardopt_pipeline_run_batch(c.pipe, NULL));
    CHECK(c.refused == 4 * MICRO);
    c.misuse = 0;
    CHECK_OK(shardopt_optimizer_zero_grad(c.opt)); /* after the batch: allowed again */
    CHECK_OK(shardopt_pipeline_destroy(c.pipe));

    /* a failing callback (stage 1's backward) stops both stages, with its reason */
    c.fail_backward = rank == 1 ? 7 : 0;
    CHECK_OK(shardopt_pipeline_create(c.opt, &stage, &po, &pipe));
    CHECK_ERR(shardopt_pipeline_run_batch(pipe, NULL), SHARDOPT_ERR_INVALID_STATE,
              "backward callback returned 7 for micro-batch 0 of model chunk 1: the chain broke");
    CHECK_OK(shardopt_pipeline_destroy(pipe));
    CHECK_OK(shardopt_optimizer_destroy(c.opt));
}

void test_pipeline(void) { run_ranks(2, pipeline_rank, NULL); }

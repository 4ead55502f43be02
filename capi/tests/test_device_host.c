/* shardopt_device_optimizer_* for real, without a GPU: the handle comes from
 * test_device_optimizer_create_on_host (device_host_hook.cpp), the device optimizer over host
 * memory; every other call is the shipped C function. On 2 ranks and every strategy that keeps
 * its own path (DDP, ZeRO-1/2, FSDP, Local SGD), the device optimizer must end bit for bit where
 * shardopt_optimizer_* ends: step protocol, layout queries, parameters, state, optimize and
 * checkpoints (which cross between the two kinds). Argument errors with a live handle: NULL
 * outputs, indices out of range, wrong counts, unset struct sizes, each leaving every output and
 * the optimizer unchanged. Prints "N passed, N failed". */
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"

/* device_host_hook.cpp */
shardopt_status test_device_optimizer_create_on_host(shardopt_comm comm, shardopt_params params,
                                                     const shardopt_optimizer_options *optimizer,
                                                     const shardopt_sharding_options *sharding, const void *initial,
                                                     shardopt_device_optimizer *out);

#define N 9 /* tensor "a": 6 elements (bucket 0), tensor "b": 3 elements (bucket 1) */
#define STEPS 3

static void make_both(shardopt_comm comm, shardopt_strategy strategy, shardopt_optimizer *host,
                      shardopt_device_optimizer *dev) {
    const float initial[N] = {0.5f, -1.f, 2.f, 0.25f, -0.75f, 1.5f, 3.f, -2.f, 1.f};
    shardopt_params p = make_params_a6_b3();
    shardopt_optimizer_options o;
    shardopt_sharding_options s;
    CHECK_OK(shardopt_optimizer_options_init(&o)); /* Adam: state that must move with the shards */
    o.lr = 0.05;
    CHECK_OK(shardopt_sharding_options_init(&s));
    s.strategy = strategy;
    s.local_sgd_period = 2;
    CHECK_OK(shardopt_optimizer_create(comm, p, &o, &s, initial, host));
    CHECK_OK(test_device_optimizer_create_on_host(comm, p, &o, &s, initial, dev));
    CHECK_OK(shardopt_params_destroy(p)); /* both copied the layout */
}

static float grad_value(int rank, int step, size_t i) {
    return 0.1f * (float)(rank + 1) * (float)((step + (int)i) % 5 - 2);
}

/* One step through each API: bucket 0 filled bucket-wise, tensor "b" tensor-wise. */
static void host_step(shardopt_optimizer o, int rank, int step, shardopt_step_result *r) {
    float *g = NULL;
    size_t n = 0, i;
    CHECK_OK(shardopt_optimizer_zero_grad(o));
    CHECK_OK(shardopt_optimizer_bucket_grad(o, 0, (void **)&g, &n));
    for (i = 0; i < n; ++i) g[i] = grad_value(rank, step, i);
    CHECK_OK(shardopt_optimizer_grad_ready(o, 0));
    CHECK_OK(shardopt_optimizer_tensor_grad(o, 1, (void **)&g, &n));
    for (i = 0; i < n; ++i) g[i] = grad_value(rank, step, 6 + i);
    CHECK_OK(shardopt_optimizer_grad_ready(o, 1));
    CHECK_OK(shardopt_optimizer_step(o, r));
}

static void device_step(shardopt_device_optimizer o, int rank, int step, shardopt_step_result *r) {
    float *g = NULL;
    size_t n = 0, i;
    CHECK_OK(shardopt_device_optimizer_zero_grad(o));
    CHECK_OK(shardopt_device_optimizer_bucket_grad(o, 0, (void **)&g, &n));
    CHECK(n == 6);
    for (i = 0; i < n; ++i) g[i] = grad_value(rank, step, i);
    CHECK_OK(shardopt_device_optimizer_grad_ready(o, 0));
    CHECK_OK(shardopt_device_optimizer_tensor_grad(o, 1, (void **)&g, &n));
    CHECK(n == 3);
    for (i = 0; i < n; ++i) g[i] = grad_value(rank, step, 6 + i);
    CHECK_OK(shardopt_device_optimizer_grad_ready(o, 1));
    CHECK_OK(shardopt_device_optimizer_step(o, r));
}

static int same_params(shardopt_optimizer host, shardopt_device_optimizer dev) {
    float a[N], b[N];
    CHECK_OK(shardopt_optimizer_get_parameters(host, a, N));
    CHECK_OK(shardopt_device_optimizer_get_parameters(dev, b, N));
    return memcmp(a, b, sizeof a) == 0;
}

/* --- the same training through both kinds ---------------------------------------------------- */
static void equal_training(shardopt_comm comm, int rank, void *arg) {
    const shardopt_strategy strategy = *(const shardopt_strategy *)arg;
    shardopt_optimizer host = NULL;
    shardopt_device_optimizer dev = NULL;
    shardopt_memory_stats hm, dm;
    int step, hi = -1, di = -2, hs = -1, ds = -2;
    size_t hn = 0, dn = 1, hp = 0, dp = 1;
    int64_t hsteps = -1, dsteps = -2;
    make_both(comm, strategy, &host, &dev);

    CHECK_OK(shardopt_optimizer_tensor_count(host, &hi));
    CHECK_OK(shardopt_device_optimizer_tensor_count(dev, &di));
    CHECK(hi == 2 && di == 2);
    CHECK_OK(shardopt_optimizer_bucket_count(host, &hi));
    CHECK_OK(shardopt_device_optimizer_bucket_count(dev, &di));
    CHECK(hi == 2 && di == 2);
    CHECK_OK(shardopt_optimizer_tensor_info(host, 1, &hn, &hi));
    CHECK_OK(shardopt_device_optimizer_tensor_info(dev, 1, &dn, &di));
    CHECK(hn == 3 && dn == 3 && hi == 1 && di == 1);
    CHECK_OK(shardopt_device_optimizer_tensor_info(dev, 0, NULL, NULL)); /* both outputs optional */
    CHECK_OK(shardopt_optimizer_bucket_info(host, 0, &hn));
    CHECK_OK(shardopt_device_optimizer_bucket_info(dev, 0, &dn));
    CHECK(hn == 6 && dn == 6);
    CHECK_OK(shardopt_optimizer_element_count(host, &hn, &hp));
    CHECK_OK(shardopt_device_optimizer_element_count(dev, &dn, &dp));
    CHECK(hn == N && dn == N && hp == dp && dp >= N);

    for (step = 0; step < STEPS; ++step) {
        shardopt_step_result hr, dr;
        memset(&hr, 0, sizeof hr);
        memset(&dr, 0xff, sizeof dr);
        hr.struct_size = dr.struct_size = sizeof hr;
        host_step(host, rank, step, &hr);
        device_step(dev, rank, step, &dr);
        CHECK(dr.applied == 1 && dr.skipped_nonfinite == 0 && dr.accumulating == 0);
        CHECK(memcmp(&hr, &dr, sizeof hr) == 0);
        if (step == 1) {
            CHECK_OK(shardopt_optimizer_set_learning_rate(host, 0.02));
            CHECK_OK(shardopt_device_optimizer_set_learning_rate(dev, 0.02));
        }
    }
    CHECK(same_params(host, dev));
    CHECK_OK(shardopt_optimizer_step_count(host, &hsteps));
    CHECK_OK(shardopt_device_optimizer_step_count(dev, &dsteps));
    CHECK(hsteps == STEPS && dsteps == STEPS);

    /* Pointers: the resident buffer (or, for FSDP, a gathered unit) holds what get_parameters says. */
    {
        float packed[N];
        float *all = NULL, *b = NULL;
        CHECK_OK(shardopt_device_optimizer_get_parameters(dev, packed, N));
        if (strategy == SHARDOPT_FSDP) {
            void *untouched = &hi;
            CHECK_ERR(shardopt_device_optimizer_parameters(dev, (void **)&untouched), SHARDOPT_ERR_INVALID_STATE,
                      "FSDP");
            CHECK_ERR(shardopt_device_optimizer_tensor_parameters(dev, 1, (void **)&untouched),
                      SHARDOPT_ERR_INVALID_STATE, "");
            CHECK(untouched == &hi);
            CHECK_OK(shardopt_device_optimizer_gather(dev, 1, (void **)&all));
            CHECK_OK(shardopt_device_optimizer_tensor_parameters(dev, 1, (void **)&b));
            CHECK(b == all && memcmp(b, packed + 6, 3 * sizeof(float)) == 0);
            CHECK_OK(shardopt_device_optimizer_release(dev, 1));
            CHECK_OK(shardopt_device_optimizer_gather(dev, 0, NULL)); /* params may be NULL */
            CHECK_OK(shardopt_device_optimizer_release(dev, 0));
        } else {
            CHECK_OK(shardopt_device_optimizer_parameters(dev, (void **)&all));
            CHECK_OK(shardopt_device_optimizer_tensor_parameters(dev, 1, (void **)&b));
            CHECK(all != NULL && memcmp(all, packed, 6 * sizeof(float)) == 0);
            CHECK(memcmp(b, packed + 6, 3 * sizeof(float)) == 0);
            CHECK_OK(shardopt_device_optimizer_gather(dev, 0, (void **)&b));
            CHECK(b == all);
            CHECK_OK(shardopt_device_optimizer_release(dev, 0));
        }
    }

    /* set_parameters on both, then state made identical, then the early-stop vote. */
    {
        float fresh[N];
        int i;
        for (i = 0; i < N; ++i) fresh[i] = (float)i * 0.125f;
        CHECK_OK(shardopt_optimizer_set_parameters(host, fresh, N));
        CHECK_OK(shardopt_device_optimizer_set_parameters(dev, fresh, N));
        CHECK(same_params(host, dev));
    }
    CHECK_OK(shardopt_optimizer_synchronize_state(host));
    CHECK_OK(shardopt_device_optimizer_synchronize_state(dev));
    CHECK(same_params(host, dev));
    CHECK_OK(shardopt_optimizer_should_early_stop(host, rank == 1, &hs));
    CHECK_OK(shardopt_device_optimizer_should_early_stop(dev, rank == 1, &ds));
    CHECK(hs == 1 && ds == 1);
    CHECK_OK(shardopt_device_optimizer_should_early_stop(dev, 0, &ds));
    CHECK(ds == 0);

    memset(&hm, 0, sizeof hm);
    memset(&dm, 0, sizeof dm);
    hm.struct_size = dm.struct_size = sizeof hm;
    CHECK_OK(shardopt_optimizer_memory_stats(host, &hm));
    CHECK_OK(shardopt_device_optimizer_memory_stats(dev, &dm));
    CHECK(dm.params_bytes > 0 && dm.params_bytes == hm.params_bytes && dm.optimizer_state_bytes > 0);
    CHECK(dm.total_bytes == dm.params_bytes + dm.grads_bytes + dm.optimizer_state_bytes + dm.buffer_bytes);

    CHECK_OK(shardopt_optimizer_destroy(host));
    CHECK_OK(shardopt_device_optimizer_destroy(dev));
}

static void test_equal_training(void) {
    static const shardopt_strategy strategies[] = {SHARDOPT_DDP, SHARDOPT_ZERO1, SHARDOPT_ZERO2, SHARDOPT_FSDP,
                                                   SHARDOPT_LOCAL_SGD};
    size_t i;
    for (i = 0; i < sizeof strategies / sizeof strategies[0]; ++i)
        run_ranks(2, equal_training, (void *)&strategies[i]);
}

/* --- argument errors with a live handle -------------------------------------------------------- */
#define BAD(expr, text) CHECK_ERR(expr, SHARDOPT_ERR_INVALID_ARGUMENT, text)

static void argument_errors(shardopt_comm comm, int rank, void *arg) {
    shardopt_optimizer host = NULL;
    shardopt_device_optimizer dev = NULL;
    float packed[N + 1], before[N], after[N];
    int i = -7;
    size_t n = 77;
    int64_t steps = -77;
    void *sentinel = &i, *p = sentinel;
    shardopt_step_result sr;
    shardopt_memory_stats ms;
    shardopt_optimize_options oo;
    (void)arg;
    make_both(comm, SHARDOPT_ZERO2, &host, &dev);
    memset(packed, 0, sizeof packed);
    memset(&sr, 0xab, sizeof sr);
    memset(&ms, 0xab, sizeof ms);
    CHECK_OK(shardopt_optimize_options_init(&oo));
    CHECK_OK(shardopt_device_optimizer_get_parameters(dev, before, N));

    /* NULL outputs */
    BAD(shardopt_device_optimizer_tensor_count(dev, NULL), "count is NULL");
    BAD(shardopt_device_optimizer_bucket_count(dev, NULL), "count is NULL");
    BAD(shardopt_device_optimizer_bucket_info(dev, 0, NULL), "count is NULL");
    BAD(shardopt_device_optimizer_step_count(dev, NULL), "steps is NULL");
    BAD(shardopt_device_optimizer_parameters(dev, NULL), "params is NULL");
    BAD(shardopt_device_optimizer_tensor_parameters(dev, 0, NULL), "params is NULL");
    BAD(shardopt_device_optimizer_get_parameters(dev, NULL, N), "packed is NULL");
    BAD(shardopt_device_optimizer_set_parameters(dev, NULL, N), "packed is NULL");
    BAD(shardopt_device_optimizer_bucket_grad(dev, 0, NULL, &n), "grad is NULL");
    BAD(shardopt_device_optimizer_tensor_grad(dev, 0, NULL, &n), "grad is NULL");
    BAD(shardopt_device_optimizer_should_early_stop(dev, 1, NULL), "stop is NULL");
    BAD(shardopt_device_optimizer_memory_stats(dev, NULL), "stats is NULL");
    BAD(shardopt_device_optimizer_serialize(dev, NULL, &n), "data is NULL");
    BAD(shardopt_device_optimizer_serialize(dev, &p, NULL), "size is NULL");
    BAD(shardopt_device_optimizer_deserialize(dev, NULL, 4), "data is NULL");
    BAD(shardopt_device_optimizer_save(dev, NULL, SHARDOPT_CHECKPOINT_SHARDED), "dir is NULL");
    BAD(shardopt_device_optimizer_load(dev, NULL), "dir is NULL");
    BAD(shardopt_device_optimizer_optimize(dev, NULL, NULL, &oo, NULL), "model is NULL");
    /* indices, counts, values and struct sizes */
    BAD(shardopt_device_optimizer_tensor_info(dev, 2, &n, &i), "tensor 2 out of range [0, 2)");
    BAD(shardopt_device_optimizer_tensor_parameters(dev, -1, &p), "tensor -1 out of range");
    BAD(shardopt_device_optimizer_tensor_grad(dev, 5, &p, &n), "tensor 5 out of range");
    BAD(shardopt_device_optimizer_bucket_info(dev, 2, &n), "bucket 2 out of range [0, 2)");
    BAD(shardopt_device_optimizer_bucket_grad(dev, -1, &p, &n), "bucket -1 out of range");
    BAD(shardopt_device_optimizer_gather(dev, 2, &p), "bucket 2 out of range");
    BAD(shardopt_device_optimizer_release(dev, 2), "bucket 2 out of range");
    BAD(shardopt_device_optimizer_grad_ready(dev, 2), "bucket 2 out of range");
    BAD(shardopt_device_optimizer_get_parameters(dev, packed, N + 1), "count is 10 but the model has 9");
    BAD(shardopt_device_optimizer_set_parameters(dev, packed, N - 1), "count is 8 but the model has 9");
    BAD(shardopt_device_optimizer_set_learning_rate(dev, -1.0), "lr");
    BAD(shardopt_device_optimizer_save(dev, "/tmp", (shardopt_checkpoint_form)7), "not a shardopt_checkpoint_form");
    sr.struct_size = 0;
    BAD(shardopt_device_optimizer_step(dev, &sr), "struct_size is not set");
    ms.struct_size = 0;
    BAD(shardopt_device_optimizer_memory_stats(dev, &ms), "struct_size is not set");

    /* nothing was written, nothing changed */
    CHECK(i == -7 && n == 77 && p == sentinel);
    {
        unsigned char pattern[sizeof sr > sizeof ms ? sizeof sr : sizeof ms];
        memset(pattern, 0xab, sizeof pattern);
        CHECK(memcmp((char *)&sr + sizeof sr.struct_size, pattern, sizeof sr - sizeof sr.struct_size) == 0);
        CHECK(memcmp((char *)&ms + sizeof ms.struct_size, pattern, sizeof ms - sizeof ms.struct_size) == 0);
    }
    CHECK_OK(shardopt_device_optimizer_step_count(dev, &steps));
    CHECK(steps == 0); /* the step with an unset result struct did not run */
    CHECK_OK(shardopt_device_optimizer_get_parameters(dev, after, N));
    CHECK(memcmp(before, after, sizeof before) == 0);
    /* ...and the step protocol still runs in lockstep with the host optimizer */
    {
        shardopt_step_result hr, dr;
        memset(&hr, 0, sizeof hr);
        memset(&dr, 0, sizeof dr);
        hr.struct_size = dr.struct_size = sizeof hr;
        host_step(host, rank, 0, &hr);
        device_step(dev, rank, 0, &dr);
        CHECK(memcmp(&hr, &dr, sizeof hr) == 0 && same_params(host, dev));
    }
    CHECK_OK(shardopt_optimizer_destroy(host));
    CHECK_OK(shardopt_device_optimizer_destroy(dev));
}

/* --- optimize() ---------------------------------------------------------------------------------- */
struct bowl {
    int fail_on_rank; /* -1: never */
    int rank;
};

/* loss = 0.5 * |p - target|^2, target[i] = i / 4 - 1. */
static int bowl_model(void *user_data, const void *params, void *grad, const int64_t *samples, size_t sample_count,
                      double *loss) {
    const struct bowl *b = (const struct bowl *)user_data;
    const float *p = (const float *)params;
    float *g = (float *)grad;
    double l = 0;
    int i;
    (void)samples;
    (void)sample_count;
    if (b->rank == b->fail_on_rank) return 3;
    for (i = 0; i < N; ++i) {
        const double d = p[i] - (i / 4.0 - 1.0);
        g[i] = (float)d;
        l += 0.5 * d * d;
    }
    *loss = l;
    return 0;
}

static void optimize_rank(shardopt_comm comm, int rank, void *arg) {
    shardopt_optimizer host = NULL;
    shardopt_device_optimizer dev = NULL;
    shardopt_optimize_options oo;
    shardopt_optimize_result hr, dr;
    struct bowl ok = {-1, 0};
    float hbest[N], dbest[N];
    double hhist[8], dhist[8];
    (void)arg;
    ok.rank = rank;
    make_both(comm, SHARDOPT_ZERO1, &host, &dev);
    CHECK_OK(shardopt_optimize_options_init(&oo));
    oo.num_samples = 32;
    oo.batch_size = 8;
    oo.epochs = 5;
    memset(&hr, 0, sizeof hr);
    memset(&dr, 0, sizeof dr);
    hr.struct_size = dr.struct_size = sizeof hr;
    hr.best_parameters = hbest;
    dr.best_parameters = dbest;
    hr.best_parameters_count = dr.best_parameters_count = N;
    hr.loss_history = hhist;
    dr.loss_history = dhist;
    hr.loss_history_capacity = dr.loss_history_capacity = 8;
    dr.best_parameters_count = 3;
    CHECK_ERR(shardopt_device_optimizer_optimize(dev, bowl_model, &ok, &oo, &dr), SHARDOPT_ERR_INVALID_ARGUMENT,
              "best_parameters_count is 3");
    dr.best_parameters_count = N;
    CHECK_OK(shardopt_optimizer_optimize(host, bowl_model, &ok, &oo, &hr));
    CHECK_OK(shardopt_device_optimizer_optimize(dev, bowl_model, &ok, &oo, &dr));
    CHECK(dr.loss_history_count == 5 && dr.iterations == 20 && dr.stopped_early == 0);
    CHECK(hr.loss_history_count == dr.loss_history_count && hr.iterations == dr.iterations);
    CHECK(hr.best_loss == dr.best_loss && dhist[4] < dhist[0]);
    CHECK(memcmp(hhist, dhist, 5 * sizeof(double)) == 0 && memcmp(hbest, dbest, sizeof hbest) == 0);
    CHECK(same_params(host, dev));
    CHECK_OK(shardopt_device_optimizer_optimize(dev, bowl_model, &ok, &oo, NULL)); /* result may be NULL */
    CHECK_OK(shardopt_optimizer_destroy(host));
    CHECK_OK(shardopt_device_optimizer_destroy(dev));
}

/* A callback failing on rank 1 stops both ranks (the communicator given to create is aborted). */
static void failing_callback_rank(shardopt_comm comm, int rank, void *arg) {
    shardopt_optimizer host = NULL;
    shardopt_device_optimizer dev = NULL;
    shardopt_optimize_options oo;
    struct bowl fails = {1, 0};
    (void)arg;
    fails.rank = rank;
    make_both(comm, SHARDOPT_DDP, &host, &dev);
    CHECK_OK(shardopt_optimizer_destroy(host));
    CHECK_OK(shardopt_comm_set_timeout(comm, 20000));
    CHECK_OK(shardopt_optimize_options_init(&oo));
    oo.num_samples = 8;
    CHECK_ERR(shardopt_device_optimizer_optimize(dev, bowl_model, &fails, &oo, NULL), SHARDOPT_ERR_INVALID_STATE,
              "model callback returned 3");
    CHECK_OK(shardopt_device_optimizer_destroy(dev));
}

/* --- checkpoints: one format for both kinds ------------------------------------------------------ */
static void checkpoint_rank(shardopt_comm comm, int rank, void *arg) {
    const char *dir = (const char *)arg;
    char sharded[512], consolidated[512], missing[512];
    shardopt_optimizer host = NULL, host2 = NULL;
    shardopt_device_optimizer dev = NULL, dev2 = NULL;
    void *bytes = NULL, *bytes2 = NULL;
    size_t size = 0, size2 = 0;
    float straight[N], resumed[N], kept[N];
    int step;
    snprintf(sharded, sizeof sharded, "%s/sharded", dir);
    snprintf(consolidated, sizeof consolidated, "%s/consolidated", dir);
    snprintf(missing, sizeof missing, "%s/never-written", dir);
    make_both(comm, SHARDOPT_ZERO2, &host, &dev);
    make_both(comm, SHARDOPT_FSDP, &host2, &dev2);

    for (step = 0; step < 2; ++step) {
        device_step(dev, rank, step, NULL);
        host_step(host, rank, step, NULL);
    }
    CHECK_OK(shardopt_device_optimizer_save(dev, sharded, SHARDOPT_CHECKPOINT_SHARDED));
    CHECK_OK(shardopt_device_optimizer_save(dev, consolidated, SHARDOPT_CHECKPOINT_CONSOLIDATED));
    CHECK_OK(shardopt_device_optimizer_serialize(dev, &bytes, &size));
    CHECK_OK(shardopt_optimizer_serialize(host, &bytes2, &size2));
    /* The same format and contents (each serialization has a generation id of its own). */
    CHECK(size > 0 && size == size2 && memcmp(bytes, bytes2, 8) == 0);
    for (step = 2; step < 4; ++step) device_step(dev, rank, step, NULL);
    CHECK_OK(shardopt_device_optimizer_get_parameters(dev, straight, N));

    /* Device checkpoints resume on the host optimizer (another strategy) and the device one. */
    CHECK_OK(shardopt_optimizer_load(host2, sharded));
    for (step = 2; step < 4; ++step) host_step(host2, rank, step, NULL);
    CHECK_OK(shardopt_optimizer_get_parameters(host2, resumed, N));
    CHECK(memcmp(straight, resumed, sizeof straight) == 0);
    CHECK_OK(shardopt_device_optimizer_load(dev2, consolidated));
    for (step = 2; step < 4; ++step) device_step(dev2, rank, step, NULL);
    CHECK_OK(shardopt_device_optimizer_get_parameters(dev2, resumed, N));
    CHECK(memcmp(straight, resumed, sizeof straight) == 0);
    /* Host bytes into the device optimizer. */
    CHECK_OK(shardopt_device_optimizer_deserialize(dev2, bytes2, size2));
    for (step = 2; step < 4; ++step) device_step(dev2, rank, step, NULL);
    CHECK_OK(shardopt_device_optimizer_get_parameters(dev2, resumed, N));
    CHECK(memcmp(straight, resumed, sizeof straight) == 0);

    /* A bad checkpoint changes nothing. */
    CHECK_OK(shardopt_device_optimizer_get_parameters(dev2, kept, N));
    ((unsigned char *)bytes)[0] ^= 0xff;
    CHECK_ERR(shardopt_device_optimizer_deserialize(dev2, bytes, size), SHARDOPT_ERR_CORRUPT, "magic");
    CHECK_ERR(shardopt_device_optimizer_load(dev2, missing), SHARDOPT_ERR_IO, "never-written");
    CHECK_OK(shardopt_device_optimizer_get_parameters(dev2, resumed, N));
    CHECK(memcmp(kept, resumed, sizeof kept) == 0);

    CHECK_OK(shardopt_buffer_free(bytes));
    CHECK_OK(shardopt_buffer_free(bytes2));
    CHECK_OK(shardopt_optimizer_destroy(host));
    CHECK_OK(shardopt_optimizer_destroy(host2));
    CHECK_OK(shardopt_device_optimizer_destroy(dev));
    CHECK_OK(shardopt_device_optimizer_destroy(dev2));
}

int main(void) {
    test_equal_training();
    run_ranks(2, argument_errors, NULL);
    run_ranks(2, optimize_rank, NULL);
    run_ranks(2, failing_callback_rank, NULL);
    run_ranks_in_temp_dir(2, checkpoint_rank, "shardopt-capi-device");
    return harness_report();
}

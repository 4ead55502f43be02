/* ZeRO-Offload's fields through the C ABI: the sharding options' cpu_offload_* switches
 * (defaults, older struct sizes, validation), and the host fields of the memory stats. In host
 * memory the switches are accepted and change nothing: training and memory stats are those of
 * the same options without them. (In CUDA memory: test_gpu.c, on a GPU or the CUDA stand-in.) */
#include <stddef.h>

#include "harness.h"
#include "tests.h"

#define N 9 /* tensor "a": 6 elements (bucket 0), tensor "b": 3 elements (bucket 1) */

static const float initial[N] = {0.5f, -1.f, 2.f, 0.25f, -0.75f, 1.5f, 3.f, -2.f, 1.f};

static void train(shardopt_optimizer o, shardopt_strategy strategy, int rank) {
    int step;
    for (step = 0; step < 3; ++step) {
        float *g = NULL;
        size_t n = 0, i;
        shardopt_step_result r = {.struct_size = sizeof r};
        if (strategy == SHARDOPT_FSDP) {
            CHECK_OK(shardopt_optimizer_gather(o, 0, NULL));
            CHECK_OK(shardopt_optimizer_release(o, 0));
        }
        CHECK_OK(shardopt_optimizer_zero_grad(o));
        CHECK_OK(shardopt_optimizer_bucket_grad(o, 0, (void **)&g, &n));
        for (i = 0; i < n; ++i) g[i] = 0.1f * (float)((step + (int)i + rank) % 5 - 2);
        CHECK_OK(shardopt_optimizer_grad_ready(o, 0));
        CHECK_OK(shardopt_optimizer_step(o, &r));
        CHECK(r.applied == 1);
    }
}

/* Host memory: every switch on, for every strategy, trains and holds exactly what it does off. */
static void meaningless_in_host_memory(shardopt_comm comm, int rank, void *arg) {
    static const shardopt_strategy strategies[] = {SHARDOPT_DDP, SHARDOPT_ZERO1, SHARDOPT_ZERO2, SHARDOPT_FSDP,
                                                   SHARDOPT_LOCAL_SGD};
    size_t k;
    (void)arg;
    CHECK_OK(shardopt_comm_set_timeout(comm, 60000));
    for (k = 0; k < sizeof strategies / sizeof strategies[0]; ++k) {
        shardopt_params p = make_params_a6_b3();
        shardopt_optimizer_options o;
        shardopt_sharding_options plain, flagged;
        shardopt_optimizer a = NULL, b = NULL;
        shardopt_memory_stats ma = {.struct_size = sizeof ma}, mb = {.struct_size = sizeof mb};
        float pa[N], pb[N];
        CHECK_OK(shardopt_optimizer_options_defaults(SHARDOPT_ADAM, &o));
        CHECK_OK(shardopt_sharding_options_init(&plain));
        plain.strategy = strategies[k];
        flagged = plain;
        flagged.cpu_offload_optimizer = SHARDOPT_ENABLE;
        flagged.cpu_offload_gradients = SHARDOPT_ENABLE;
        flagged.cpu_offload_params = SHARDOPT_ENABLE;
        CHECK_OK(shardopt_optimizer_create(comm, p, &o, &plain, initial, &a));
        CHECK_OK(shardopt_optimizer_create(comm, p, &o, &flagged, initial, &b));
        train(a, strategies[k], rank);
        train(b, strategies[k], rank);
        CHECK_OK(shardopt_optimizer_get_parameters(a, pa, N));
        CHECK_OK(shardopt_optimizer_get_parameters(b, pb, N));
        CHECK(memcmp(pa, pb, sizeof pa) == 0);
        CHECK_OK(shardopt_optimizer_memory_stats(a, &ma));
        CHECK_OK(shardopt_optimizer_memory_stats(b, &mb));
        CHECK(ma.params_bytes == mb.params_bytes && ma.grads_bytes == mb.grads_bytes &&
              ma.optimizer_state_bytes == mb.optimizer_state_bytes && ma.buffer_bytes == mb.buffer_bytes &&
              ma.total_bytes == mb.total_bytes && mb.optimizer_state_bytes > 0);
        CHECK(mb.host_params_bytes == 0 && mb.host_grads_bytes == 0 && mb.host_optimizer_state_bytes == 0 &&
              mb.host_total_bytes == 0);
        CHECK_OK(shardopt_optimizer_destroy(a));
        CHECK_OK(shardopt_optimizer_destroy(b));
        CHECK_OK(shardopt_params_destroy(p));
    }
}

static void options_and_validation(void) {
    shardopt_sharding_options s, zeroed = {.struct_size = sizeof zeroed}, old;
    shardopt_optimizer_options o;
    shardopt_params p = make_params_a6_b3();
    shardopt_comm c = NULL;
    shardopt_optimizer sentinel = (shardopt_optimizer)&sentinel, opt = sentinel;
    shardopt_memory_stats m;
    CHECK_OK(shardopt_sharding_options_init(&s));
    CHECK(s.cpu_offload_optimizer == SHARDOPT_DISABLE && s.cpu_offload_gradients == SHARDOPT_DISABLE &&
          s.cpu_offload_params == SHARDOPT_DISABLE);
    CHECK(zeroed.cpu_offload_optimizer == SHARDOPT_AUTO); /* AUTO: off */
    /* A caller built before the fields existed: _init fills only its prefix, create accepts it. */
    memset(&old, 0x5a, sizeof old);
    CHECK_OK(shardopt_sharding_options_init_sized(&old, offsetof(shardopt_sharding_options, cpu_offload_optimizer)));
    CHECK(old.struct_size == offsetof(shardopt_sharding_options, cpu_offload_optimizer));
    CHECK(*(const unsigned char *)&old.cpu_offload_optimizer == 0x5a); /* untouched */
    CHECK_OK(shardopt_comm_create_inprocess(1, &c));
    CHECK_OK(shardopt_optimizer_options_defaults(SHARDOPT_ADAM, &o));
    CHECK_OK(shardopt_optimizer_create(c, p, &o, &old, initial, &opt));
    /* The memory stats of a caller built before the host fields: only its prefix is written. */
    memset(&m, 0x5a, sizeof m);
    m.struct_size = offsetof(shardopt_memory_stats, host_params_bytes);
    CHECK_OK(shardopt_optimizer_memory_stats(opt, &m));
    CHECK(m.params_bytes == N * sizeof(float) && *(const unsigned char *)&m.host_params_bytes == 0x5a);
    CHECK_OK(shardopt_optimizer_destroy(opt));
    opt = sentinel;
    /* Not a switch. */
    s.cpu_offload_gradients = (shardopt_switch)7;
    CHECK_ERR(shardopt_optimizer_create(c, p, &o, &s, initial, &opt), SHARDOPT_ERR_INVALID_ARGUMENT,
              "cpu_offload_gradients");
    CHECK(opt == sentinel);
    /* CUDA memory checks the combinations before anything else (so even in a build without CUDA). */
    CHECK_OK(shardopt_sharding_options_init(&s));
    s.memory = SHARDOPT_MEMORY_CUDA;
    s.strategy = SHARDOPT_ZERO2;
    s.cpu_offload_gradients = SHARDOPT_ENABLE;
    CHECK_ERR(shardopt_optimizer_create(c, p, &o, &s, initial, &opt), SHARDOPT_ERR_INVALID_ARGUMENT,
              "cpu_offload_gradients needs cpu_offload_optimizer");
    s.cpu_offload_optimizer = SHARDOPT_ENABLE;
    s.cpu_offload_params = SHARDOPT_ENABLE;
    CHECK_ERR(shardopt_optimizer_create(c, p, &o, &s, initial, &opt), SHARDOPT_ERR_INVALID_ARGUMENT,
              "cpu_offload_params needs parameters sharded at rest");
    s.strategy = SHARDOPT_LOCAL_SGD;
    s.cpu_offload_params = SHARDOPT_DISABLE;
    CHECK_ERR(shardopt_optimizer_create(c, p, &o, &s, initial, &opt), SHARDOPT_ERR_INVALID_ARGUMENT, "local_sgd");
    CHECK(opt == sentinel);
    CHECK_OK(shardopt_comm_destroy(c));
    CHECK_OK(shardopt_params_destroy(p));
}

void test_offload(void) {
    options_and_validation();
    run_ranks(2, meaningless_in_host_memory, NULL);
}

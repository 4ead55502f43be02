/* Checkpoints through the ABI on 2 ranks: save/load in both forms, serialize/deserialize (and
 * serialize_to, the stream form), a resumed run equal to an uninterrupted one, and each error path with its message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "tests.h"

#define N 9

static shardopt_optimizer make_zero2(shardopt_comm comm) {
    shardopt_params p = make_params_a6_b3();
    shardopt_optimizer_options o;
    shardopt_sharding_options s;
    shardopt_optimizer opt = NULL;
    const float initial[N] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    CHECK_OK(shardopt_optimizer_options_init(&o));
    o.kind = SHARDOPT_ADAM;
    CHECK_OK(shardopt_sharding_options_init(&s));
    s.strategy = SHARDOPT_ZERO2;
    CHECK_OK(shardopt_optimizer_create(comm, p, &o, &s, initial, &opt));
    CHECK_OK(shardopt_params_destroy(p));
    return opt;
}

static void adam_step(shardopt_optimizer opt, int rank, int step) {
    int b, buckets = 0;
    CHECK_OK(shardopt_optimizer_zero_grad(opt));
    CHECK_OK(shardopt_optimizer_bucket_count(opt, &buckets));
    for (b = 0; b < buckets; ++b) {
        float *g = NULL;
        size_t i, count = 0;
        CHECK_OK(shardopt_optimizer_bucket_grad(opt, b, (void **)&g, &count));
        for (i = 0; i < count; ++i) g[i] = 0.1f * (float)(rank + 1) * (float)((step + (int)i) % 5 - 2);
        CHECK_OK(shardopt_optimizer_grad_ready(opt, b));
    }
    {
        shardopt_step_result r;
        memset(&r, 0, sizeof r);
        r.struct_size = sizeof r;
        CHECK_OK(shardopt_optimizer_step(opt, &r));
    }
}

/* A growing buffer a shardopt_write_fn appends to; fail_after >= 0: returns 5 (saying "disk
 * full") once it holds that many bytes. */
typedef struct sink {
    unsigned char *data;
    size_t size, calls;
    long fail_after;
} sink;

static int append(void *user_data, const void *data, size_t size) {
    sink *s = (sink *)user_data;
    unsigned char *grown;
    if (s->fail_after >= 0 && s->size >= (size_t)s->fail_after) {
        shardopt_model_error("disk full"); /* the reason every rank's error names */
        return 5;
    }
    grown = (unsigned char *)realloc(s->data, s->size + size);
    if (!grown) return 1;
    memcpy(grown + s->size, data, size);
    s->data = grown;
    s->size += size;
    ++s->calls;
    return 0;
}

/* A shardopt_write_fn that fails without a reason. */
static int fail_quietly(void *user_data, const void *data, size_t size) {
    (void)user_data, (void)data, (void)size;
    return 7;
}

/* serialize_to: serialize's bytes, on the ranks that want them (resuming b as they do); a
 * writer's failure fails the call on every rank, which then goes on working. */
static void serialize_to_checks(shardopt_optimizer a, shardopt_optimizer b, int rank) {
    sink s;
    void *bytes = NULL;
    size_t size = 0;
    float before[N], after[N];
    CHECK_OK(shardopt_optimizer_serialize(a, &bytes, &size));
    memset(&s, 0, sizeof s);
    s.fail_after = -1;
    CHECK_OK(shardopt_optimizer_serialize_to(a, append, &s));
    CHECK(s.size == size && s.calls >= 1); /* the same bytes but for the generation in the head */
    /* Both resume b alike. */
    CHECK_OK(shardopt_optimizer_deserialize(b, s.data, s.size));
    adam_step(b, rank, 7);
    CHECK_OK(shardopt_optimizer_get_parameters(b, before, N));
    CHECK_OK(shardopt_optimizer_deserialize(b, bytes, size));
    adam_step(b, rank, 7);
    CHECK_OK(shardopt_optimizer_get_parameters(b, after, N));
    CHECK(memcmp(before, after, sizeof before) == 0);
    free(s.data);
    /* Only rank 1 wants them. */
    memset(&s, 0, sizeof s);
    s.fail_after = -1;
    CHECK_OK(shardopt_optimizer_serialize_to(a, rank == 1 ? append : NULL, &s));
    CHECK(rank == 1 ? s.size == size : s.size == 0);
    free(s.data);
    /* Rank 0's writer fails after the head: the call fails on both ranks (IO), naming its reason. */
    memset(&s, 0, sizeof s);
    s.fail_after = rank == 0 ? 1 : -1;
    CHECK_ERR(shardopt_optimizer_serialize_to(a, append, &s), SHARDOPT_ERR_IO, "writer returned 5 on rank 0: disk full");
    free(s.data);
    /* A reason left by an earlier callback is not named by a writer that gives none. */
    memset(&s, 0, sizeof s);
    s.fail_after = -1;
    shardopt_model_error("stale");
    CHECK_ERR(shardopt_optimizer_serialize_to(a, rank == 0 ? fail_quietly : append, &s), SHARDOPT_ERR_IO,
              "writer returned 7 on rank 0");
    CHECK(strstr(shardopt_last_error_message(), "stale") == NULL);
    free(s.data);
    CHECK_ERR(shardopt_optimizer_serialize_to(NULL, append, &s), SHARDOPT_ERR_INVALID_ARGUMENT,
              "optimizer handle is NULL");
    /* The optimizer goes on. */
    CHECK_OK(shardopt_optimizer_get_parameters(a, before, N));
    adam_step(a, rank, 9);
    CHECK_OK(shardopt_optimizer_get_parameters(a, after, N));
    CHECK(memcmp(before, after, sizeof before) != 0);
    CHECK_OK(shardopt_buffer_free(bytes));
}

/* describe/read: serialized bytes in torch.optim's terms, without an optimizer; `at` the parameters they hold. */
static void describe_checks(void *bytes, size_t size, const float *at) {
    shardopt_checkpoint_info info;
    float part[N];
    double wide[N];
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    CHECK_OK(shardopt_checkpoint_describe(bytes, size, &info));
    CHECK(info.tensor_count == 2 && info.state_slots == 2 && info.step_count == 3 && info.element_count == N);
    CHECK(info.dtype == SHARDOPT_F32 && strcmp(info.optimizer, "adam") == 0);
    CHECK(strcmp(info.torch_optimizer, "Adam") == 0 && strcmp(info.state_names, "exp_avg,exp_avg_sq") == 0);
    CHECK(info.torch_step == 1);
    CHECK_OK(shardopt_checkpoint_read(bytes, size, -1, part, N, SHARDOPT_F32));
    CHECK(memcmp(part, at, sizeof part) == 0);
    CHECK_OK(shardopt_checkpoint_read(bytes, size, 1, part, N, SHARDOPT_F32)); /* exp_avg_sq: squares, not 0 */
    CHECK(part[0] > 0.0f);
    CHECK_ERR(shardopt_checkpoint_read(bytes, size, 2, part, N, SHARDOPT_F32), SHARDOPT_ERR_INVALID_ARGUMENT,
              "slot 2 outside -1 (parameters) .. 1");
    CHECK_ERR(shardopt_checkpoint_read(bytes, size, 0, part, N - 1, SHARDOPT_F32), SHARDOPT_ERR_INVALID_ARGUMENT,
              "the buffer holds 8 elements; the checkpoint's part has 9");
    CHECK_ERR(shardopt_checkpoint_read(bytes, size, 0, wide, N, SHARDOPT_F64), SHARDOPT_ERR_INVALID_ARGUMENT,
              "the checkpoint's parts are f32");
    CHECK_ERR(shardopt_checkpoint_describe(bytes, size, NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "info is NULL");
    CHECK_ERR(shardopt_checkpoint_describe(NULL, size, &info), SHARDOPT_ERR_INVALID_ARGUMENT, "data is NULL");
    ((unsigned char *)bytes)[0] ^= 0xff; /* wrong magic */
    CHECK_ERR(shardopt_checkpoint_describe(bytes, size, &info), SHARDOPT_ERR_CORRUPT, "magic");
    ((unsigned char *)bytes)[0] ^= 0xff;
}

static void checkpoint_rank(shardopt_comm comm, int rank, void *arg) {
    const char *dir = (const char *)arg;
    char sharded[512], consolidated[512], missing[512];
    float straight[N], resumed[N], other[N], at3[N];
    void *bytes = NULL;
    size_t size = 0;
    int step;
    shardopt_optimizer a = make_zero2(comm), b = make_zero2(comm);
    snprintf(sharded, sizeof sharded, "%s/sharded", dir);
    snprintf(consolidated, sizeof consolidated, "%s/consolidated", dir);
    snprintf(missing, sizeof missing, "%s/never-written", dir);

    for (step = 0; step < 3; ++step) adam_step(a, rank, step);
    CHECK_OK(shardopt_optimizer_save(a, sharded, SHARDOPT_CHECKPOINT_SHARDED));
    CHECK_OK(shardopt_optimizer_save(a, consolidated, SHARDOPT_CHECKPOINT_CONSOLIDATED));
    CHECK_OK(shardopt_optimizer_serialize(a, &bytes, &size));
    CHECK(bytes != NULL && size > 0);
    CHECK_OK(shardopt_optimizer_get_parameters(a, at3, N));
    describe_checks(bytes, size, at3);
    for (step = 3; step < 6; ++step) adam_step(a, rank, step);
    CHECK_OK(shardopt_optimizer_get_parameters(a, straight, N));

    /* Resume from each form: 3 more steps equal the uninterrupted 6, bit for bit. */
    CHECK_OK(shardopt_optimizer_load(b, sharded));
    for (step = 3; step < 6; ++step) adam_step(b, rank, step);
    CHECK_OK(shardopt_optimizer_get_parameters(b, resumed, N));
    CHECK(memcmp(straight, resumed, sizeof straight) == 0);
    CHECK_OK(shardopt_optimizer_load(b, consolidated));
    for (step = 3; step < 6; ++step) adam_step(b, rank, step);
    CHECK_OK(shardopt_optimizer_get_parameters(b, resumed, N));
    CHECK(memcmp(straight, resumed, sizeof straight) == 0);
    CHECK_OK(shardopt_optimizer_deserialize(b, bytes, size));
    for (step = 3; step < 6; ++step) adam_step(b, rank, step);
    CHECK_OK(shardopt_optimizer_get_parameters(b, resumed, N));
    CHECK(memcmp(straight, resumed, sizeof straight) == 0);

    /* Errors: each leaves the optimizer as it was. */
    CHECK_ERR(shardopt_optimizer_save(NULL, sharded, SHARDOPT_CHECKPOINT_SHARDED), SHARDOPT_ERR_INVALID_ARGUMENT,
              "optimizer handle is NULL");
    CHECK_ERR(shardopt_optimizer_save(b, NULL, SHARDOPT_CHECKPOINT_SHARDED), SHARDOPT_ERR_INVALID_ARGUMENT,
              "dir is NULL");
    CHECK_ERR(shardopt_optimizer_save(b, sharded, (shardopt_checkpoint_form)7), SHARDOPT_ERR_INVALID_ARGUMENT,
              "not a shardopt_checkpoint_form");
    CHECK_ERR(shardopt_optimizer_load(b, NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "dir is NULL");
    CHECK_ERR(shardopt_optimizer_serialize(b, NULL, &size), SHARDOPT_ERR_INVALID_ARGUMENT, "data is NULL");
    CHECK_ERR(shardopt_optimizer_serialize(b, &bytes, NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "size is NULL");
    CHECK_ERR(shardopt_optimizer_deserialize(b, NULL, 4), SHARDOPT_ERR_INVALID_ARGUMENT, "data is NULL");
    CHECK_OK(shardopt_optimizer_get_parameters(b, other, N));
    CHECK_ERR(shardopt_optimizer_load(b, missing), SHARDOPT_ERR_IO, "never-written");
    ((unsigned char *)bytes)[0] ^= 0xff; /* wrong magic */
    CHECK_ERR(shardopt_optimizer_deserialize(b, bytes, size), SHARDOPT_ERR_CORRUPT, "magic");
    ((unsigned char *)bytes)[0] ^= 0xff;
    CHECK_ERR(shardopt_optimizer_deserialize(b, bytes, size / 2), SHARDOPT_ERR_CORRUPT, "");
    CHECK_OK(shardopt_optimizer_get_parameters(b, resumed, N));
    CHECK(memcmp(other, resumed, sizeof other) == 0);

    serialize_to_checks(a, b, rank);
    CHECK_OK(shardopt_buffer_free(bytes));
    CHECK_OK(shardopt_buffer_free(NULL));
    CHECK_OK(shardopt_optimizer_destroy(a));
    CHECK_OK(shardopt_optimizer_destroy(b));
}

void test_checkpoint(void) { run_ranks_in_temp_dir(2, checkpoint_rank, "shardopt-capi-ckpt"); }

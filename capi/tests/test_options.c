/* Options structs (defaults, struct_size versioning, validation naming the field) and
 * parameter sets. */
#include <stddef.h>

#include "harness.h"
#include "tests.h"

static void test_optimizer_options(void) {
    shardopt_optimizer_options o;
    CHECK_OK(shardopt_optimizer_options_init(&o));
    CHECK(o.struct_size == sizeof o && o.kind == SHARDOPT_ADAM && o.lr == 1e-3 && o.beta2 == 0.999);
    /* _init sets the bit of every field */
    CHECK(o.field_mask == (uint64_t)((SHARDOPT_OPT_FIELD_INITIAL_ACCUMULATOR_VALUE << 1) - 1));
    CHECK_OK(shardopt_optimizer_options_defaults(SHARDOPT_SGD, &o));
    CHECK(o.kind == SHARDOPT_SGD && o.momentum == 0.0);
    CHECK_OK(shardopt_optimizer_options_defaults(SHARDOPT_LAMB, &o));
    CHECK(o.kind == SHARDOPT_LAMB && o.eps == 1e-6);
    CHECK_ERR(shardopt_optimizer_options_init(NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "optimizer options is NULL");
    CHECK_ERR(shardopt_optimizer_options_defaults((shardopt_optimizer_kind)9, &o), SHARDOPT_ERR_INVALID_ARGUMENT,
              "invalid optimizer kind 9");
    CHECK_ERR(shardopt_optimizer_options_init_sized(&o, 4, SHARDOPT_ADAM), SHARDOPT_ERR_INVALID_ARGUMENT,
              "struct_size 4 is too small");
    /* An older caller's struct: only the prefix is written. */
    o.amsgrad = 77;
    CHECK_OK(shardopt_optimizer_options_init_sized(&o, offsetof(shardopt_optimizer_options, amsgrad), SHARDOPT_ADAM));
    CHECK(o.struct_size == offsetof(shardopt_optimizer_options, amsgrad) && o.amsgrad == 77 && o.eps == 1e-8);
    /* ...and field_mask names only the fields in that prefix */
    CHECK((o.field_mask & SHARDOPT_OPT_FIELD_EPS) && (o.field_mask & SHARDOPT_OPT_FIELD_KIND) &&
          !(o.field_mask & SHARDOPT_OPT_FIELD_AMSGRAD) && !(o.field_mask & SHARDOPT_OPT_FIELD_ALPHA));
}

static void test_sharding_and_optimize_options(void) {
    shardopt_sharding_options s;
    shardopt_optimize_options oo;
    CHECK_OK(shardopt_sharding_options_init(&s));
    CHECK(s.struct_size == sizeof s && s.strategy == SHARDOPT_DDP && s.gradient_accumulation_steps == 1 &&
          s.skip_nonfinite == 1 && s.staging_buffers == 1 && s.fsdp_prefetch == 1 && s.data_parallel_size == -1 &&
          s.local_sgd_period == 4);
    /* ABI 2: hybrid's data strategy defaults to DDP (was ZeRO-2), so that a zeroed struct means it;
     * the switches are written explicitly; the fields appended in ABI 2 */
    CHECK(s.hybrid_data_strategy == SHARDOPT_DDP && s.skip_nonfinite == SHARDOPT_ENABLE &&
          s.fsdp_prefetch == SHARDOPT_ENABLE && s.pipeline_parallel_size == 1 && s.tensor_parallel_size == 1 &&
          s.hsdp_replicas == 1);
    CHECK(s.memory == SHARDOPT_MEMORY_HOST && s.cuda_stream == NULL && s.update_threads == 0 &&
          s.overlap_param_gather == SHARDOPT_DISABLE);
    /* an older caller's struct: only its prefix is written */
    s.update_threads = 77;
    CHECK_OK(shardopt_sharding_options_init_sized(&s, offsetof(shardopt_sharding_options, update_threads)));
    CHECK(s.update_threads == 77 && s.memory == SHARDOPT_MEMORY_HOST &&
          s.struct_size == offsetof(shardopt_sharding_options, update_threads));
    CHECK_ERR(shardopt_sharding_options_init(NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "sharding options is NULL");
    CHECK_ERR(shardopt_sharding_options_init_sized(&s, 0), SHARDOPT_ERR_INVALID_ARGUMENT, "too small");
    CHECK_OK(shardopt_optimize_options_init(&oo));
    CHECK(oo.struct_size == sizeof oo && oo.epochs == 1 && oo.num_samples == 0 && oo.batch_size == 0);
    CHECK_ERR(shardopt_optimize_options_init(NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "optimize options is NULL");
    CHECK_ERR(shardopt_optimize_options_init_sized(&oo, 2), SHARDOPT_ERR_INVALID_ARGUMENT, "too small");
}

static void test_params(void) {
    shardopt_params p = NULL;
    int index = -1, count = -1;
    size_t n = 0;
    CHECK_ERR(shardopt_params_create(SHARDOPT_I32, 0, &p), SHARDOPT_ERR_INVALID_ARGUMENT, "f32");
    CHECK_ERR(shardopt_params_create((shardopt_dtype)42, 0, &p), SHARDOPT_ERR_INVALID_ARGUMENT, "invalid dtype 42");
    CHECK_ERR(shardopt_params_create(SHARDOPT_F32, 0, NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "out is NULL");
    CHECK(p == NULL);
    CHECK_OK(shardopt_params_create(SHARDOPT_F64, 1024, &p));
    CHECK_OK(shardopt_params_add(p, "w", 10, 0, &index));
    CHECK(index == 0);
    CHECK_OK(shardopt_params_end_bucket(p));
    CHECK_OK(shardopt_params_add(p, "b", 3, 1, NULL));
    CHECK_ERR(shardopt_params_add(p, NULL, 3, 0, NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "name is NULL");
    CHECK_ERR(shardopt_params_add(p, "", 3, 0, NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "must not be empty");
    CHECK_ERR(shardopt_params_add(p, "z", 0, 0, NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "zero elements");
    CHECK_ERR(shardopt_params_add(p, "w", 4, 0, NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "registered twice");
    CHECK_OK(shardopt_params_tensor_count(p, &count));
    CHECK(count == 2);
    CHECK_OK(shardopt_params_element_count(p, &n));
    CHECK(n == 13);
    CHECK_OK(shardopt_params_padded_count(p, 4, &n));
    CHECK(n == 12 + 4); /* 10 -> 12, 3 -> 4 */
    CHECK_ERR(shardopt_params_padded_count(p, 0, &n), SHARDOPT_ERR_INVALID_ARGUMENT, "shards must be >= 1");
    CHECK_ERR(shardopt_params_padded_count(p, 4, NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "count is NULL");
    CHECK_ERR(shardopt_params_tensor_count(p, NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "count is NULL");
    CHECK_ERR(shardopt_params_element_count(p, NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "count is NULL");
    CHECK_OK(shardopt_params_destroy(p));
}

/* shardopt_sharding_options_validate: auto_sync_gradients with the struct's strategy (as create
 * checks it), and async SGD's staleness with its own strategy. */
static void test_sharding_validate(void) {
    shardopt_sharding_options s;
    CHECK_OK(shardopt_sharding_options_init(&s));
    s.auto_sync_gradients = SHARDOPT_DISABLE;
    CHECK_OK(shardopt_sharding_options_validate(&s)); /* DDP: Local SGD */
    s.strategy = SHARDOPT_FSDP;
    CHECK_ERR(shardopt_sharding_options_validate(&s), SHARDOPT_ERR_INVALID_ARGUMENT,
              "auto_sync_gradients off (Local SGD) needs replicated parameters, but fsdp");
    s.auto_sync_gradients = SHARDOPT_ENABLE;
    s.async_staleness = 2;
    CHECK_ERR(shardopt_sharding_options_validate(&s), SHARDOPT_ERR_INVALID_ARGUMENT, "async_staleness applies");
    s.strategy = SHARDOPT_ASYNC_SGD;
    CHECK_OK(shardopt_sharding_options_validate(&s));
    s.async_staleness = -1;
    CHECK_ERR(shardopt_sharding_options_validate(&s), SHARDOPT_ERR_INVALID_ARGUMENT, "async_staleness must be in");
}

/* The _strict forms: 0 (SHARDOPT_AUTO) where the C ABI reads 0 as a default that _init writes as a value is
 * refused naming the field (a struct _init or a preset filled has none there); 0 where it is a value, or _init's own
 * default, is not; fields beyond struct_size are not read. */
static void test_validate_strict(void) {
    shardopt_sharding_options s;
    shardopt_elastic_options e;
    int p;
    for (p = SHARDOPT_SHARDING_DEFAULT; p <= SHARDOPT_SHARDING_ZERO_OFFLOAD_FULL; ++p) {
        CHECK_OK(shardopt_sharding_options_init_preset(&s, sizeof s, (shardopt_sharding_preset)p));
        CHECK_OK(shardopt_sharding_options_validate_strict(&s));
    }
    CHECK_OK(shardopt_sharding_options_init(&s));
    CHECK_OK(shardopt_sharding_options_validate_strict(&s));
    s.local_sgd_period = 0;
    CHECK_OK(shardopt_sharding_options_validate(&s)); /* 0 = the default, for create */
    CHECK_ERR(shardopt_sharding_options_validate_strict(&s), SHARDOPT_ERR_INVALID_ARGUMENT,
              "local_sgd_period is 0, which the C ABI reads as its default (4)");
    s.local_sgd_period = 4;
    s.compression_ratio = 0;
    CHECK_ERR(shardopt_sharding_options_validate_strict(&s), SHARDOPT_ERR_INVALID_ARGUMENT,
              "compression_ratio is 0, which the C ABI reads as its default (0.1)");
    s.compression_ratio = 1.5; /* what _validate refuses, _strict refuses too */
    CHECK_ERR(shardopt_sharding_options_validate_strict(&s), SHARDOPT_ERR_INVALID_ARGUMENT, "ratio");
    s.compression_ratio = 0.25;
    s.power_sgd_rank = 0;
    CHECK_ERR(shardopt_sharding_options_validate_strict(&s), SHARDOPT_ERR_INVALID_ARGUMENT, "power_sgd_rank is 0");
    s.power_sgd_rank = 2;
    s.gradient_accumulation_steps = 0;
    CHECK_ERR(shardopt_sharding_options_validate_strict(&s), SHARDOPT_ERR_INVALID_ARGUMENT,
              "gradient_accumulation_steps is 0");
    s.gradient_accumulation_steps = 1;
    s.data_parallel_size = 0;
    CHECK_ERR(shardopt_sharding_options_validate_strict(&s), SHARDOPT_ERR_INVALID_ARGUMENT,
              "data_parallel_size is 0, which the C ABI reads as its default (-1)");
    s.data_parallel_size = -1;
    s.error_feedback = SHARDOPT_AUTO;
    CHECK_ERR(shardopt_sharding_options_validate_strict(&s), SHARDOPT_ERR_INVALID_ARGUMENT,
              "error_feedback is 0, which the C ABI reads as its default (SHARDOPT_ENABLE)");
    s.error_feedback = SHARDOPT_DISABLE;
    /* values, and _init's own defaults, that are 0 */
    s.max_grad_norm = 0;
    s.update_threads = 0;
    s.parameter_group_size = 0;
    s.learning_rate = 0;
    s.strategy = SHARDOPT_ASYNC_SGD;
    s.async_staleness = 0;
    CHECK_OK(shardopt_sharding_options_validate_strict(&s));
    /* an older caller's struct: what lies beyond it is the library's default */
    s.strategy = SHARDOPT_DDP;
    s.struct_size = offsetof(shardopt_sharding_options, update_threads);
    s.auto_sync_gradients = SHARDOPT_AUTO;
    CHECK_OK(shardopt_sharding_options_validate_strict(&s));
    CHECK_ERR(shardopt_sharding_options_validate_strict(NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "sharding options is NULL");

    CHECK_OK(shardopt_elastic_options_init(&e));
    CHECK_OK(shardopt_elastic_options_validate_strict(&e)); /* checkpoint_every 0, no directory: _init's */
    e.min_workers = 0;
    CHECK_OK(shardopt_elastic_options_validate(&e));
    CHECK_ERR(shardopt_elastic_options_validate_strict(&e), SHARDOPT_ERR_INVALID_ARGUMENT,
              "min_workers is 0, which the C ABI reads as its default (1)");
    e.min_workers = 2;
    e.max_workers = 0;
    CHECK_ERR(shardopt_elastic_options_validate_strict(&e), SHARDOPT_ERR_INVALID_ARGUMENT,
              "max_workers is 0, which the C ABI reads as its default (1024)");
    e.max_workers = 1;
    CHECK_ERR(shardopt_elastic_options_validate_strict(&e), SHARDOPT_ERR_INVALID_ARGUMENT,
              "maxWorkers 1 is below minWorkers 2");
}

void test_options(void) {
    test_optimizer_options();
    test_sharding_and_optimize_options();
    test_params();
    test_sharding_validate();
    test_validate_strict();
}

/* Gradient compression through the C ABI: the sharding options' compression fields (defaults,
 * validation), shardopt_params_add_matrix, and a 2-rank DDP step per method whose bytes on the
 * wire (step result, shardopt_optimizer_bytes_sent) fall as the method says, with replicas
 * identical; memory stats count the residuals. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "tests.h"

#define ROWS 128
#define COLS 128
#define COUNT (ROWS * COLS)

struct run {
    shardopt_compression method;
    uint64_t bytes[2];
    uint64_t total[2];
    uint64_t compression_bytes;
    float params[2][COUNT];
};

static void compressed_step_rank(shardopt_comm comm, int rank, void *arg) {
    struct run *run = (struct run *)arg;
    shardopt_params p = NULL;
    shardopt_optimizer_options o;
    shardopt_sharding_options s;
    shardopt_optimizer opt = NULL;
    shardopt_step_result r;
    shardopt_memory_stats m;
    float *g = NULL;
    size_t n = 0, i;
    int index = -1;
    memset(&r, 0, sizeof r);
    memset(&m, 0, sizeof m);
    r.struct_size = sizeof r;
    m.struct_size = sizeof m;
    CHECK_OK(shardopt_params_create(SHARDOPT_F32, 0, &p));
    CHECK_OK(shardopt_params_add_matrix(p, "w", ROWS, COLS, 0, &index));
    CHECK(index == 0);
    CHECK_OK(shardopt_optimizer_options_defaults(SHARDOPT_SGD, &o));
    CHECK_OK(shardopt_sharding_options_init(&s));
    s.compression = run->method;
    s.compression_ratio = 0.01;
    CHECK_OK(shardopt_optimizer_create(comm, p, &o, &s, NULL, &opt));
    CHECK_OK(shardopt_optimizer_zero_grad(opt));
    CHECK_OK(shardopt_optimizer_tensor_grad(opt, 0, (void **)&g, &n));
    CHECK(n == COUNT);
    for (i = 0; i < n; ++i) g[i] = (float)sin((double)(i * (size_t)(rank + 1)));
    CHECK_OK(shardopt_optimizer_step(opt, &r));
    CHECK(r.applied == 1);
    run->bytes[rank] = r.bytes_sent;
    CHECK_OK(shardopt_optimizer_bytes_sent(opt, &run->total[rank]));
    CHECK_OK(shardopt_optimizer_memory_stats(opt, &m));
    CHECK(m.total_bytes == m.params_bytes + m.grads_bytes + m.optimizer_state_bytes + m.buffer_bytes + m.compression_bytes);
    if (rank == 0) run->compression_bytes = m.compression_bytes;
    CHECK_OK(shardopt_optimizer_get_parameters(opt, run->params[rank], COUNT));
    CHECK_OK(shardopt_optimizer_destroy(opt));
    CHECK_OK(shardopt_params_destroy(p));
}

static struct run *compressed_step(shardopt_compression method) {
    struct run *run = (struct run *)calloc(1, sizeof *run);
    run->method = method;
    run_ranks(2, compressed_step_rank, run);
    CHECK(memcmp(run->params[0], run->params[1], sizeof run->params[0]) == 0); /* replicas agree */
    CHECK(run->total[0] >= run->bytes[0] && run->bytes[0] > 0);
    return run;
}

static void test_bytes_on_the_wire(void) {
    struct run *plain = compressed_step(SHARDOPT_COMPRESSION_NONE);
    struct run *bf16 = compressed_step(SHARDOPT_COMPRESSION_BF16);
    struct run *int8 = compressed_step(SHARDOPT_COMPRESSION_INT8);
    struct run *top_k = compressed_step(SHARDOPT_COMPRESSION_TOP_K);
    struct run *power = compressed_step(SHARDOPT_COMPRESSION_POWER_SGD);
    const double base = (double)plain->bytes[0];
    CHECK(fabs((double)bf16->bytes[0] / base - 0.5) < 0.01);
    CHECK((double)int8->bytes[0] / base <= 0.27);
    CHECK((double)top_k->bytes[0] / base <= 0.03);
    CHECK((double)power->bytes[0] / base <= (ROWS + COLS) * 4.0 / COUNT + 0.005);
    CHECK(plain->compression_bytes == 0 && bf16->compression_bytes > 0);
    /* int8 keeps a residual of the whole bucket (and of the owned chunk): at least 1.5 x 4 bytes each */
    CHECK(int8->compression_bytes >= (uint64_t)COUNT * 6);
    free(plain), free(bf16), free(int8), free(top_k), free(power);
}

static void test_compression_options(void) {
    shardopt_sharding_options s;
    shardopt_comm c = NULL;
    shardopt_params p = make_params_a6_b3();
    shardopt_optimizer_options o = {.struct_size = sizeof o};
    shardopt_optimizer opt = NULL;
    CHECK_OK(shardopt_sharding_options_init(&s));
    CHECK(s.compression == SHARDOPT_COMPRESSION_NONE && s.compression_ratio == 0.1 && s.compression_block_size == 256 &&
          s.power_sgd_rank == 4 && s.power_sgd_min_elements == 4096 && s.error_feedback == SHARDOPT_ENABLE);
    CHECK_OK(shardopt_comm_create_inprocess(1, &c));
    s.compression = (shardopt_compression)9;
    CHECK_ERR(shardopt_optimizer_create(c, p, &o, &s, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT, "compression");
    s.compression = SHARDOPT_COMPRESSION_TOP_K;
    s.compression_ratio = 1.5;
    CHECK_ERR(shardopt_optimizer_create(c, p, &o, &s, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT, "compression.ratio");
    s.compression_ratio = 0.0; /* the default, 0.1 */
    s.error_feedback = (shardopt_switch)7;
    CHECK_ERR(shardopt_optimizer_create(c, p, &o, &s, NULL, &opt), SHARDOPT_ERR_INVALID_ARGUMENT, "error_feedback");
    CHECK(opt == NULL);
    CHECK_ERR(shardopt_params_add_matrix(p, "m", 0, 4, 0, NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "rows and columns");
    CHECK_ERR(shardopt_optimizer_bytes_sent(NULL, NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "");
    CHECK_OK(shardopt_params_destroy(p));
    CHECK_OK(shardopt_comm_destroy(c));
}

void test_compression(void) {
    test_compression_options();
    test_bytes_on_the_wire();
}

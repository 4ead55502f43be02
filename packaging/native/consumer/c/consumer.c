/* A C program built against the installed libshardopt-dev with `pkg-config shardopt-c`:
 * 2 in-process ranks (threads) minimize 0.5*|x - target|^2 with ZeRO-2 over SGD, then check
 * that both ranks hold the same parameters and that they reached the target.
 * `consumer ucx [DIR]` does the same as one rank of a UCX job (shardopt-run -n 2 -- consumer ucx),
 * and saves the optimizer as a sharded checkpoint in DIR when given. */
#include <math.h>
#include <pthread.h>
#include <shardopt.h>
#include <stdio.h>
#include <string.h>

#define RANKS 2
#define N 37
#define STEPS 200

struct ctx { shardopt_comm comm; int rank, failed; float result[N]; const char *checkpoint; };

#define TRY(e) do { shardopt_status s_ = (e); if (s_ != SHARDOPT_OK) { \
    fprintf(stderr, "rank %d: %s: %s (%s)\n", c->rank, #e, shardopt_last_error_message(), \
            shardopt_status_name(s_)); shardopt_comm_abort(c->comm, "failed"); goto done; } } while (0)

static void *rank_main(void *arg) {
    struct ctx *c = (struct ctx *)arg;
    shardopt_params layout = NULL;
    shardopt_optimizer opt = NULL;
    shardopt_optimizer_options sgd;
    shardopt_sharding_options sharding = {.struct_size = sizeof sharding, .strategy = SHARDOPT_ZERO2};
    float initial[N] = {0};
    int step, bucket;
    size_t i, count;
    c->failed = 1;
    TRY(shardopt_params_create(SHARDOPT_F32, 0, &layout));
    TRY(shardopt_params_add(layout, "w", N, 0, NULL));
    TRY(shardopt_optimizer_options_defaults(SHARDOPT_SGD, &sgd));
    sgd.lr = 0.1;
    TRY(shardopt_optimizer_create(c->comm, layout, &sgd, &sharding, initial, &opt));
    for (step = 0; step < STEPS; ++step) {
        float x[N];
        void *g;
        TRY(shardopt_optimizer_get_parameters(opt, x, N));
        TRY(shardopt_optimizer_zero_grad(opt));
        TRY(shardopt_optimizer_tensor_grad(opt, 0, &g, &count));
        for (i = 0; i < count; ++i) ((float *)g)[i] = x[i] - (float)i; /* target[i] = i */
        TRY(shardopt_optimizer_tensor_info(opt, 0, NULL, &bucket));
        TRY(shardopt_optimizer_grad_ready(opt, bucket));
        TRY(shardopt_optimizer_step(opt, NULL));
    }
    TRY(shardopt_optimizer_get_parameters(opt, c->result, N));
    if (c->checkpoint) TRY(shardopt_optimizer_save(opt, c->checkpoint, SHARDOPT_CHECKPOINT_SHARDED));
    c->failed = 0;
done:
    shardopt_optimizer_destroy(opt);
    shardopt_params_destroy(layout);
    return NULL;
}

static int ucx_rank(const char *checkpoint) {
    struct ctx c;
    float max[N];
    double worst = 0;
    int i, differ = 0;
    memset(&c, 0, sizeof c);
    c.checkpoint = checkpoint;
    if (shardopt_comm_create_from_env("ucx", &c.comm) != SHARDOPT_OK) {
        fprintf(stderr, "ucx: %s\n", shardopt_last_error_message());
        return 1;
    }
    shardopt_comm_rank(c.comm, &c.rank);
    rank_main(&c);
    /* every rank the same parameters: the elementwise maximum over ranks is each rank's own */
    if (!c.failed && shardopt_allreduce(c.comm, c.result, max, N, SHARDOPT_F32, SHARDOPT_MAX) != SHARDOPT_OK) c.failed = 1;
    shardopt_comm_destroy(c.comm);
    if (c.failed) return 1;
    differ = memcmp(max, c.result, sizeof max) != 0;
    for (i = 0; i < N; ++i) worst = fmax(worst, fabs(c.result[i] - i));
    printf("C consumer: UCX rank %d, ZeRO-2 SGD, %d steps, ranks %s, largest distance from the target %.3g\n",
           c.rank, STEPS, differ ? "DIFFER" : "equal", worst);
    return !differ && worst < 1e-3 ? 0 : 1;
}

int main(int argc, char **argv) {
    shardopt_comm comms[RANKS];
    pthread_t threads[RANKS];
    struct ctx ctx[RANKS];
    int r;
    memset(ctx, 0, sizeof ctx);
    double worst = 0;
    if (argc > 1 && strcmp(argv[1], "ucx") == 0) return ucx_rank(argc > 2 ? argv[2] : NULL);
    printf("libshardopt %u.%u.%u (ABI %u)\n", shardopt_version() / 10000, shardopt_version() / 100 % 100,
           shardopt_version() % 100, shardopt_abi_version());
    if (shardopt_comm_create_inprocess(RANKS, comms) != SHARDOPT_OK) {
        fprintf(stderr, "create: %s\n", shardopt_last_error_message());
        return 1;
    }
    for (r = 0; r < RANKS; ++r) {
        ctx[r].comm = comms[r];
        ctx[r].rank = r;
        pthread_create(&threads[r], NULL, rank_main, &ctx[r]);
    }
    for (r = 0; r < RANKS; ++r) pthread_join(threads[r], NULL);
    for (r = 0; r < RANKS; ++r) shardopt_comm_destroy(comms[r]);
    for (r = 0; r < RANKS; ++r)
        if (ctx[r].failed) return 1;
    if (memcmp(ctx[0].result, ctx[1].result, sizeof ctx[0].result) != 0) {
        fprintf(stderr, "the ranks' parameters differ\n");
        return 1;
    }
    for (r = 0; r < N; ++r) worst = fmax(worst, fabs(ctx[0].result[r] - r));
    printf("C consumer: 2 in-process ranks, ZeRO-2 SGD, %d steps, largest distance from the target %.3g\n",
           STEPS, worst);
    return worst < 1e-3 ? 0 : 1;
}

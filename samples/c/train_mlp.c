/* train_mlp: trains a 2-layer MLP classifier (ReLU hidden layer, softmax cross-entropy) on
 * synthetic Gaussian blobs, on 4 in-process ranks (one pthread each), with ZeRO-2 over Adam,
 * through the shardopt C ABI only. Prints the loss of each epoch and where the steps spent their
 * time; exits non-zero unless the loss decreased.
 *
 *   train_mlp [epochs]
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardopt.h"

enum { RANKS = 4, INPUTS = 16, HIDDEN = 64, CLASSES = 4, SAMPLES = 2048, BATCH = 256 };

/* Packed parameter layout: fc1.weight [HIDDEN x INPUTS], fc1.bias, fc2.weight [CLASSES x HIDDEN], fc2.bias. */
#define W1 0
#define B1 (W1 + HIDDEN * INPUTS)
#define W2 (B1 + HIDDEN)
#define B2 (W2 + CLASSES * HIDDEN)
#define NPARAMS (B2 + CLASSES)

static double xs[SAMPLES][INPUTS];
static int ys[SAMPLES];
static int epochs = 8;
static double first_loss = -1, last_loss = -1;

/* SplitMix64 and Box-Muller: deterministic data and initialization on every rank. */
static uint64_t rng_state;
static uint64_t rng_next(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double rng_uniform(void) { return (double)(rng_next() >> 11) * (1.0 / 9007199254740992.0); }
static double rng_normal(void) {
    double u1 = rng_uniform(), u2 = rng_uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static void make_blobs(void) {
    double centers[CLASSES][INPUTS];
    int i, f;
    rng_state = 7;
    for (i = 0; i < CLASSES; ++i)
        for (f = 0; f < INPUTS; ++f) centers[i][f] = rng_normal() * 2.0;
    for (i = 0; i < SAMPLES; ++i) {
        ys[i] = (int)(rng_next() % CLASSES);
        for (f = 0; f < INPUTS; ++f) xs[i][f] = centers[ys[i]][f] + rng_normal();
    }
}

static void init_params(float *p) {
    int i;
    const double b1 = 1.0 / sqrt((double)INPUTS), b2 = 1.0 / sqrt((double)HIDDEN);
    rng_state = 11;
    for (i = 0; i < W2; ++i) p[i] = (float)((rng_uniform() * 2.0 - 1.0) * b1);
    for (i = W2; i < NPARAMS; ++i) p[i] = (float)((rng_uniform() * 2.0 - 1.0) * b2);
}

/* Sum (not mean) of the loss over samples [lo, hi); adds the summed gradient into g. */
static double loss_grad(const float *p, float *g, int lo, int hi) {
    double loss = 0;
    int s, h, c, f;
    for (s = lo; s < hi; ++s) {
        double hidden[HIDDEN], logits[CLASSES], prob[CLASSES], dh[HIDDEN], max = -1e300, sum = 0;
        for (h = 0; h < HIDDEN; ++h) {
            double a = p[B1 + h];
            for (f = 0; f < INPUTS; ++f) a += p[W1 + h * INPUTS + f] * xs[s][f];
            hidden[h] = a > 0 ? a : 0;
        }
        for (c = 0; c < CLASSES; ++c) {
            double a = p[B2 + c];
            for (h = 0; h < HIDDEN; ++h) a += p[W2 + c * HIDDEN + h] * hidden[h];
            logits[c] = a;
            if (a > max) max = a;
        }
        for (c = 0; c < CLASSES; ++c) sum += (prob[c] = exp(logits[c] - max));
        for (c = 0; c < CLASSES; ++c) prob[c] /= sum;
        loss += -log(prob[ys[s]] > 1e-300 ? prob[ys[s]] : 1e-300);
        for (h = 0; h < HIDDEN; ++h) dh[h] = 0;
        for (c = 0; c < CLASSES; ++c) {
            const double d = prob[c] - (c == ys[s]);
            g[B2 + c] += (float)d;
            for (h = 0; h < HIDDEN; ++h) {
                g[W2 + c * HIDDEN + h] += (float)(d * hidden[h]);
                dh[h] += d * p[W2 + c * HIDDEN + h];
            }
        }
        for (h = 0; h < HIDDEN; ++h) {
            if (hidden[h] <= 0) continue;
            g[B1 + h] += (float)dh[h];
            for (f = 0; f < INPUTS; ++f) g[W1 + h * INPUTS + f] += (float)(dh[h] * xs[s][f]);
        }
    }
    return loss;
}

#define TRY(expr)                                                                                         \
    do {                                                                                                  \
        shardopt_status s_ = (expr);                                                                      \
        if (s_ != SHARDOPT_OK) {                                                                          \
            fprintf(stderr, "rank %d: %s failed: %s (%s)\n", rank, #expr, shardopt_last_error_message(), \
                    shardopt_status_name(s_));                                                            \
            shardopt_comm_abort(comm, "a rank failed");                                                   \
            goto done;                                                                                    \
        }                                                                                                 \
    } while (0)

struct rank_ctx {
    shardopt_comm comm;
    int rank;
    int failed;
};

static void *train_rank(void *arg) {
    struct rank_ctx *ctx = (struct rank_ctx *)arg;
    shardopt_comm comm = ctx->comm;
    const int rank = ctx->rank;
    shardopt_params layout = NULL;
    shardopt_optimizer opt = NULL;
    shardopt_optimizer_options adam;
    /* Zero means default: name only the fields that differ (no _init needed). */
    shardopt_sharding_options sharding = {.struct_size = sizeof sharding, .strategy = SHARDOPT_ZERO2};
    double reduce_wait = 0, update = 0, post_update = 0;
    static const char *names[4] = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};
    static const size_t counts[4] = {HIDDEN * INPUTS, HIDDEN, CLASSES * HIDDEN, CLASSES};
    float *params = (float *)malloc(NPARAMS * sizeof(float)), *grad = (float *)malloc(NPARAMS * sizeof(float));
    int t, epoch, b0;

    ctx->failed = 1;
    if (!params || !grad) goto done;
    init_params(params);
    TRY(shardopt_params_create(SHARDOPT_F32, 0, &layout));
    for (t = 0; t < 4; ++t) {
        TRY(shardopt_params_add(layout, names[t], counts[t], 0, NULL));
        if (t == 1) TRY(shardopt_params_end_bucket(layout)); /* one bucket per layer */
    }
    TRY(shardopt_optimizer_options_defaults(SHARDOPT_ADAM, &adam));
    adam.lr = 3e-3;
    TRY(shardopt_optimizer_create(comm, layout, &adam, &sharding, params, &opt));

    for (epoch = 1; epoch <= epochs; ++epoch) {
        double epoch_loss = 0;
        for (b0 = 0; b0 < SAMPLES; b0 += BATCH) {
            const int lo = b0 + BATCH * rank / RANKS, hi = b0 + BATCH * (rank + 1) / RANKS;
            double loss;
            size_t offset = 0, count, i;
            shardopt_step_result step = {.struct_size = sizeof step};
            TRY(shardopt_optimizer_get_parameters(opt, params, NPARAMS));
            memset(grad, 0, NPARAMS * sizeof(float));
            /* Each rank's gradient is scaled so that the average over ranks is the batch mean. */
            loss = loss_grad(params, grad, lo, hi);
            TRY(shardopt_optimizer_zero_grad(opt));
            for (t = 0; t < 4; ++t) {
                void *g;
                int bucket;
                TRY(shardopt_optimizer_tensor_grad(opt, t, &g, &count));
                for (i = 0; i < count; ++i) ((float *)g)[i] = grad[offset + i] * (float)RANKS / (float)BATCH;
                offset += count;
                TRY(shardopt_optimizer_tensor_info(opt, t, NULL, &bucket));
                if (t == 1 || t == 3) TRY(shardopt_optimizer_grad_ready(opt, bucket)); /* last tensor of a bucket */
            }
            TRY(shardopt_optimizer_step(opt, &step));
            reduce_wait += step.reduce_wait_seconds;
            update += step.update_seconds;
            post_update += step.post_update_seconds;
            TRY(shardopt_allreduce(comm, &loss, &loss, 1, SHARDOPT_F64, SHARDOPT_SUM));
            epoch_loss += loss;
        }
        epoch_loss /= SAMPLES;
        if (rank == 0) {
            printf("epoch %2d  loss %.4f\n", epoch, epoch_loss);
            if (epoch == 1) first_loss = epoch_loss;
            last_loss = epoch_loss;
        }
    }
    if (rank == 0) {
        shardopt_memory_stats mem;
        mem.struct_size = sizeof mem;
        TRY(shardopt_optimizer_memory_stats(opt, &mem));
        printf("rank 0 holds %llu bytes (params %llu, grads %llu, optimizer state %llu)\n",
               (unsigned long long)mem.total_bytes, (unsigned long long)mem.params_bytes,
               (unsigned long long)mem.grads_bytes, (unsigned long long)mem.optimizer_state_bytes);
        printf("rank 0 steps: %.3f ms waiting for reductions, %.3f ms updating, %.3f ms gathering parameters\n",
               reduce_wait * 1e3, update * 1e3, post_update * 1e3);
    }
    ctx->failed = 0;
done:
    shardopt_optimizer_destroy(opt);
    shardopt_params_destroy(layout);
    free(params);
    free(grad);
    return NULL;
}

int main(int argc, char **argv) {
    shardopt_comm comms[RANKS];
    pthread_t threads[RANKS];
    struct rank_ctx ctx[RANKS];
    int r, failed = 0;
    if (argc > 1) epochs = atoi(argv[1]);
    if (epochs < 2) {
        fprintf(stderr, "usage: %s [epochs >= 2]\n", argv[0]);
        return 2;
    }
    if (shardopt_abi_version() != SHARDOPT_ABI_VERSION) {
        fprintf(stderr, "libshardopt ABI %u, but this program was built for %d\n", shardopt_abi_version(),
                SHARDOPT_ABI_VERSION);
        return 1;
    }
    printf("shardopt %u.%u.%u: MLP on %d in-process ranks, ZeRO-2 over Adam, %d samples, batch %d\n",
           shardopt_version() / 10000, shardopt_version() / 100 % 100, shardopt_version() % 100, RANKS, SAMPLES, BATCH);
    make_blobs();
    if (shardopt_comm_create_inprocess(RANKS, comms) != SHARDOPT_OK) {
        fprintf(stderr, "%s\n", shardopt_last_error_message());
        return 1;
    }
    for (r = 0; r < RANKS; ++r) {
        ctx[r].comm = comms[r];
        ctx[r].rank = r;
        pthread_create(&threads[r], NULL, train_rank, &ctx[r]);
    }
    for (r = 0; r < RANKS; ++r) {
        pthread_join(threads[r], NULL);
        failed |= ctx[r].failed;
        shardopt_comm_destroy(comms[r]);
    }
    if (failed) return 1;
    if (!(last_loss < first_loss * 0.9)) {
        fprintf(stderr, "loss did not decrease: %.4f -> %.4f\n", first_loss, last_loss);
        return 1;
    }
    printf("loss decreased from %.4f to %.4f\n", first_loss, last_loss);
    return 0;
}

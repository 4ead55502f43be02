/* Collectives over a 4-rank in-process group driven by pthreads: blocking and async forms, split,
 * work handles, and their argument errors (bad dtype/op, NULL buffers, root/peer out of range). */
#include "harness.h"
#include "tests.h"

#define RANKS 4

static void collectives_rank(shardopt_comm comm, int rank, void *arg) {
    float x[RANKS], y[RANKS * RANKS], one;
    double d;
    int32_t token;
    int i, size = 0, ok, done = 0, sub_rank = -1, sub_size = -1;
    shardopt_work w = NULL, w2 = NULL;
    shardopt_comm sub = NULL, none = NULL;
    (void)arg;

    CHECK_OK(shardopt_comm_size(comm, &size));
    CHECK(size == RANKS);
    CHECK_OK(shardopt_comm_set_timeout(comm, 60000));
    CHECK_ERR(shardopt_comm_set_timeout(comm, 0), SHARDOPT_ERR_INVALID_ARGUMENT, "timeout must be positive");
    CHECK_ERR(shardopt_comm_rank(comm, NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "rank is NULL");
    CHECK_ERR(shardopt_comm_size(comm, NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "size is NULL");

    /* allreduce */
    for (i = 0; i < RANKS; ++i) x[i] = (float)(rank + i);
    CHECK_OK(shardopt_allreduce(comm, x, x, RANKS, SHARDOPT_F32, SHARDOPT_SUM));
    ok = 1;
    for (i = 0; i < RANKS; ++i) ok &= x[i] == (float)(6 + 4 * i);
    CHECK(ok);
    d = rank;
    CHECK_OK(shardopt_allreduce(comm, &d, &d, 1, SHARDOPT_F64, SHARDOPT_MAX));
    CHECK(d == 3.0);

    /* reduce_scatter: rank r gets sum over ranks of element r */
    for (i = 0; i < RANKS; ++i) x[i] = (float)i;
    CHECK_OK(shardopt_reduce_scatter(comm, x, &one, 1, SHARDOPT_F32, SHARDOPT_SUM));
    CHECK(one == (float)(RANKS * rank));

    /* allgather */
    one = (float)(10 * rank);
    CHECK_OK(shardopt_allgather(comm, &one, x, 1, SHARDOPT_F32));
    CHECK(x[0] == 0.f && x[1] == 10.f && x[2] == 20.f && x[3] == 30.f);

    /* broadcast and reduce */
    token = rank == 2 ? 42 : 0;
    CHECK_OK(shardopt_broadcast(comm, &token, 1, SHARDOPT_I32, 2));
    CHECK(token == 42);
    one = 1.f;
    CHECK_OK(shardopt_reduce(comm, &one, rank == 1 ? x : NULL, 1, SHARDOPT_F32, SHARDOPT_SUM, 1));
    if (rank == 1) CHECK(x[0] == (float)RANKS);
    CHECK_OK(shardopt_barrier(comm));

    /* ring send/recv */
    token = rank;
    CHECK_OK(shardopt_send(comm, &token, 1, SHARDOPT_I32, (rank + 1) % RANKS, 5));
    CHECK_OK(shardopt_recv(comm, &token, 1, SHARDOPT_I32, (rank + RANKS - 1) % RANKS, 5));
    CHECK(token == (rank + RANKS - 1) % RANKS);

    /* async forms */
    for (i = 0; i < RANKS; ++i) x[i] = 1.f;
    CHECK_OK(shardopt_allreduce_async(comm, x, x, RANKS, SHARDOPT_F32, SHARDOPT_AVG, &w));
    CHECK_OK(shardopt_work_wait(w));
    CHECK_OK(shardopt_work_test(w, &done));
    CHECK(done == 1 && x[3] == 1.f);
    CHECK_ERR(shardopt_work_test(w, NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "done is NULL");
    CHECK_OK(shardopt_work_destroy(w));
    for (i = 0; i < RANKS; ++i) x[i] = (float)i;
    CHECK_OK(shardopt_reduce_scatter_async(comm, x, &one, 1, SHARDOPT_F32, SHARDOPT_MIN, &w));
    CHECK_OK(shardopt_work_wait(w));
    CHECK(one == (float)rank);
    CHECK_OK(shardopt_work_destroy(w));
    one = (float)rank;
    CHECK_OK(shardopt_allgather_async(comm, &one, y, 1, SHARDOPT_F32, &w));
    CHECK_OK(shardopt_work_wait(w));
    CHECK(y[3] == 3.f);
    CHECK_OK(shardopt_work_destroy(w));
    token = rank == 0 ? 7 : 0;
    CHECK_OK(shardopt_broadcast_async(comm, &token, 1, SHARDOPT_I32, 0, &w));
    CHECK_OK(shardopt_work_wait(w));
    CHECK(token == 7);
    CHECK_OK(shardopt_work_destroy(w));
    one = 2.f;
    CHECK_OK(shardopt_reduce_async(comm, &one, &x[0], 1, SHARDOPT_F32, SHARDOPT_PROD, 0, &w));
    CHECK_OK(shardopt_work_wait(w));
    if (rank == 0) CHECK(x[0] == 16.f);
    CHECK_OK(shardopt_work_destroy(w));
    CHECK_OK(shardopt_barrier_async(comm, &w));
    CHECK_OK(shardopt_work_wait(w));
    CHECK_OK(shardopt_work_destroy(w));
    token = rank;
    d = -1; /* before the receive is posted: it may complete (and write d) at any moment after */
    CHECK_OK(shardopt_recv_async(comm, &d, 1, SHARDOPT_F64, (rank + 1) % RANKS, 1, &w2));
    {
        double mine = rank;
        CHECK_OK(shardopt_send_async(comm, &mine, 1, SHARDOPT_F64, (rank + RANKS - 1) % RANKS, 1, &w));
        CHECK_OK(shardopt_work_wait(w));
        CHECK_OK(shardopt_work_wait(w2));
    }
    CHECK(d == (double)((rank + 1) % RANKS));
    CHECK_OK(shardopt_work_destroy(w));
    CHECK_OK(shardopt_work_destroy(w2));

    /* split: even and odd ranks; rank 3 also asks for no group in a second split */
    CHECK_OK(shardopt_comm_split(comm, rank % 2, -rank, &sub));
    CHECK_OK(shardopt_comm_rank(sub, &sub_rank));
    CHECK_OK(shardopt_comm_size(sub, &sub_size));
    CHECK(sub_size == 2 && sub_rank == (rank < 2 ? 1 : 0)); /* key -rank reverses the order */
    d = rank;
    CHECK_OK(shardopt_allreduce(sub, &d, &d, 1, SHARDOPT_F64, SHARDOPT_SUM));
    CHECK(d == (rank % 2 ? 4.0 : 2.0));
    CHECK_OK(shardopt_comm_split(comm, rank == 3 ? -1 : 0, 0, &none));
    CHECK(rank == 3 ? none == NULL : none != NULL);
    CHECK_OK(shardopt_comm_destroy(none));
    CHECK_OK(shardopt_comm_destroy(sub));
    CHECK_ERR(shardopt_comm_split(comm, 0, 0, NULL), SHARDOPT_ERR_INVALID_ARGUMENT, "out is NULL");

    /* argument errors: reported locally, the group stays usable */
    CHECK_ERR(shardopt_allreduce(comm, x, x, 1, (shardopt_dtype)99, SHARDOPT_SUM), SHARDOPT_ERR_INVALID_ARGUMENT,
              "invalid dtype 99");
    CHECK_ERR(shardopt_allreduce(comm, x, x, 1, SHARDOPT_F32, (shardopt_reduce_op)-1), SHARDOPT_ERR_INVALID_ARGUMENT,
              "invalid reduce op -1");
    CHECK_ERR(shardopt_allreduce(comm, NULL, x, 1, SHARDOPT_F32, SHARDOPT_SUM), SHARDOPT_ERR_INVALID_ARGUMENT,
              "null buffer");
    CHECK_ERR(shardopt_allgather(comm, x, NULL, 1, SHARDOPT_F32), SHARDOPT_ERR_INVALID_ARGUMENT, "null buffer");
    CHECK_ERR(shardopt_reduce_scatter(comm, x, NULL, 1, SHARDOPT_F32, SHARDOPT_SUM), SHARDOPT_ERR_INVALID_ARGUMENT,
              "null buffer");
    CHECK_ERR(shardopt_broadcast(comm, x, 1, SHARDOPT_F32, RANKS), SHARDOPT_ERR_INVALID_ARGUMENT,
              "root 4 out of range");
    CHECK_ERR(shardopt_reduce(comm, x, x, 1, SHARDOPT_F32, SHARDOPT_SUM, -1), SHARDOPT_ERR_INVALID_ARGUMENT,
              "root -1 out of range");
    CHECK_ERR(shardopt_send(comm, x, 1, SHARDOPT_F32, 9, 0), SHARDOPT_ERR_INVALID_ARGUMENT, "peer 9 out of range");
    CHECK_ERR(shardopt_recv(comm, x, 1, SHARDOPT_F32, 0, -2), SHARDOPT_ERR_INVALID_ARGUMENT, "tag must be >= 0");
    CHECK_ERR(shardopt_allreduce_async(comm, x, x, 1, SHARDOPT_F32, SHARDOPT_SUM, NULL), SHARDOPT_ERR_INVALID_ARGUMENT,
              "work is NULL");
    w = NULL;
    CHECK_ERR(shardopt_broadcast_async(comm, x, 1, SHARDOPT_F32, 17, &w), SHARDOPT_ERR_INVALID_ARGUMENT,
              "root 17 out of range");
    CHECK_ERR(shardopt_send_async(comm, x, 1, (shardopt_dtype)7, 0, 0, &w), SHARDOPT_ERR_INVALID_ARGUMENT,
              "invalid dtype 7");
    CHECK(w == NULL);
    CHECK_OK(shardopt_barrier(comm));
}

/* scatter: root's data (only root knows its count) split in rank order, each part in a library buffer; a count that
 * does not split, on root, fails every rank at once. */
static void scatter_rank(shardopt_comm comm, int rank, void *arg) {
    double all[2 * RANKS], *mine = NULL;
    size_t n = 99;
    int i;
    (void)arg;
    CHECK_OK(shardopt_comm_set_timeout(comm, 60000));
    for (i = 0; i < 2 * RANKS; ++i) all[i] = 10.0 * i;
    CHECK_OK(shardopt_scatter(comm, rank == 1 ? all : NULL, rank == 1 ? 2 * RANKS : 0, SHARDOPT_F64, 1, (void **)&mine, &n));
    CHECK(n == 2 && mine[0] == 20.0 * rank && mine[1] == 20.0 * rank + 10.0);
    CHECK_OK(shardopt_buffer_free(mine));
    CHECK_OK(shardopt_scatter(comm, all, 0, SHARDOPT_F64, 0, (void **)&mine, &n)); /* nothing to split */
    CHECK(n == 0);
    CHECK_OK(shardopt_buffer_free(mine));
    CHECK_ERR(shardopt_scatter(comm, all, 3, SHARDOPT_F64, 0, (void **)&mine, &n), SHARDOPT_ERR_INVALID_ARGUMENT,
              "scatter: root rank 0's data (3 elements) is not a multiple of the world size 4");
    CHECK_ERR(shardopt_scatter(comm, all, 4, SHARDOPT_F64, RANKS, (void **)&mine, &n), SHARDOPT_ERR_INVALID_ARGUMENT,
              "root 4 outside [0, 4)");
    CHECK_ERR(shardopt_scatter(comm, all, 4, SHARDOPT_F64, 0, NULL, &n), SHARDOPT_ERR_INVALID_ARGUMENT, "recv is NULL");
}

/* abort on one rank fails the others' pending and later calls with the reason. */
static void abort_rank(shardopt_comm comm, int rank, void *arg) {
    (void)arg;
    if (rank == 0) CHECK_OK(shardopt_comm_abort(comm, "rank 0 gave up"));
    CHECK_ERR(shardopt_barrier(comm), SHARDOPT_ERR_INVALID_STATE, "rank 0 gave up");
}

/* Mismatched collectives are reported on every rank. */
static void mismatch_rank(shardopt_comm comm, int rank, void *arg) {
    float x[2] = {0, 0};
    (void)arg;
    CHECK_OK(shardopt_comm_set_timeout(comm, 20000));
    CHECK_ERR(shardopt_allreduce(comm, x, x, rank == 0 ? 1 : 2, SHARDOPT_F32, SHARDOPT_SUM), SHARDOPT_ERR_MISMATCH,
              "allreduce");
}

void test_collectives(void) {
    run_ranks(RANKS, collectives_rank, NULL);
    run_ranks(RANKS, scatter_rank, NULL);
    run_ranks(2, abort_rank, NULL);
    run_ranks(2, mismatch_rank, NULL);
}

/* Experimental: in-process groups joined by name (shardopt_comm_create_inprocess_member). Each
 * rank claims its handle from its own thread and the group works; a rank claimed twice, a size
 * that differs from the group's and bad arguments are refused; a fully claimed id is free again. */
#define SHARDOPT_EXPERIMENTAL /* before the header: declares the experimental part */
#include <stdlib.h>

#include "harness.h"
#include "tests.h"

#define RANKS 4

struct member {
    int rank;
    double sum;
    int size;
};

static void *member_main(void *arg) {
    struct member *m = (struct member *)arg;
    shardopt_comm c = NULL;
    int rank = -1;
    double value = m->rank + 1;
    CHECK_OK(shardopt_comm_create_inprocess_member("capi-registry", m->rank, RANKS, &c));
    CHECK_OK(shardopt_comm_rank(c, &rank));
    CHECK_OK(shardopt_comm_size(c, &m->size));
    CHECK(rank == m->rank);
    CHECK_OK(shardopt_comm_set_timeout(c, 60000));
    CHECK_OK(shardopt_allreduce(c, &value, &m->sum, 1, SHARDOPT_F64, SHARDOPT_SUM));
    CHECK_OK(shardopt_comm_destroy(c));
    return NULL;
}

static void test_claim_from_threads(void) {
    pthread_t threads[RANKS];
    struct member members[RANKS];
    int round, r;
    for (round = 0; round < 2; ++round) { /* the second round reuses the id: the group was forgotten */
        for (r = RANKS - 1; r >= 0; --r) { /* claimed in any order */
            members[r].rank = r;
            members[r].sum = 0;
            members[r].size = 0;
            pthread_create(&threads[r], NULL, member_main, &members[r]);
        }
        for (r = 0; r < RANKS; ++r) pthread_join(threads[r], NULL);
        for (r = 0; r < RANKS; ++r) CHECK(members[r].sum == 10.0 && members[r].size == RANKS);
    }
}

static void test_claim_errors(void) {
    shardopt_comm sentinel = (shardopt_comm)&sentinel, a = NULL, b = NULL, c = sentinel, d = NULL, e = NULL;
    CHECK_OK(shardopt_comm_create_inprocess_member("capi-twice", 0, 2, &a));
    CHECK_ERR(shardopt_comm_create_inprocess_member("capi-twice", 0, 2, &c), SHARDOPT_ERR_INVALID_ARGUMENT,
              "rank 0 of in-process group 'capi-twice' was already claimed");
    CHECK_ERR(shardopt_comm_create_inprocess_member("capi-twice", 1, 3, &c), SHARDOPT_ERR_INVALID_ARGUMENT,
              "in-process group 'capi-twice' has size 2, not 3");
    CHECK_ERR(shardopt_comm_create_inprocess_member("capi-twice", 2, 2, &c), SHARDOPT_ERR_INVALID_ARGUMENT,
              "rank 2 is out of range [0, 2)");
    CHECK_ERR(shardopt_comm_create_inprocess_member("capi-twice", -1, 2, &c), SHARDOPT_ERR_INVALID_ARGUMENT,
              "rank -1 is out of range");
    CHECK_ERR(shardopt_comm_create_inprocess_member("capi-twice", 0, 0, &c), SHARDOPT_ERR_INVALID_ARGUMENT,
              "size must be >= 1");
    CHECK_ERR(shardopt_comm_create_inprocess_member(NULL, 0, 2, &c), SHARDOPT_ERR_INVALID_ARGUMENT,
              "group_id is NULL");
    CHECK_ERR(shardopt_comm_create_inprocess_member("capi-twice", 1, 2, NULL), SHARDOPT_ERR_INVALID_ARGUMENT,
              "out is NULL");
    CHECK(c == sentinel);
    CHECK_OK(shardopt_comm_create_inprocess_member("capi-twice", 1, 2, &b)); /* the last rank: forgotten */
    /* the id names a new group now, of any size */
    CHECK_OK(shardopt_comm_create_inprocess_member("capi-twice", 0, 3, &c));
    CHECK_OK(shardopt_comm_create_inprocess_member("capi-twice", 2, 3, &d));
    CHECK_OK(shardopt_comm_create_inprocess_member("capi-twice", 1, 3, &e));
    {
        int size = 0;
        CHECK_OK(shardopt_comm_size(e, &size));
        CHECK(size == 3);
    }
    /* a group of one is complete at its first claim */
    {
        shardopt_comm solo = NULL, again = NULL;
        CHECK_OK(shardopt_comm_create_inprocess_member("capi-solo", 0, 1, &solo));
        CHECK_OK(shardopt_comm_create_inprocess_member("capi-solo", 0, 1, &again));
        CHECK_OK(shardopt_barrier(solo));
        CHECK_OK(shardopt_comm_destroy(solo));
        CHECK_OK(shardopt_comm_destroy(again));
    }
    CHECK_OK(shardopt_comm_destroy(a));
    CHECK_OK(shardopt_comm_destroy(b));
    CHECK_OK(shardopt_comm_destroy(c));
    CHECK_OK(shardopt_comm_destroy(d));
    CHECK_OK(shardopt_comm_destroy(e));
}

void test_registry(void) {
    test_claim_from_threads();
    test_claim_errors();
}

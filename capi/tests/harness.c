#include "harness.h"

#include <stdlib.h>
#include <unistd.h>

static pthread_mutex_t harness_mutex = PTHREAD_MUTEX_INITIALIZER;
static int passed_count, failed_count;

void harness_record(int ok, const char *file, int line, const char *what, const char *detail) {
    pthread_mutex_lock(&harness_mutex);
    if (ok) {
        ++passed_count;
    } else {
        ++failed_count;
        fprintf(stderr, "%s:%d: FAILED: %s%s%s\n", file, line, what, detail[0] ? "  [last error: " : "",
                detail[0] ? detail : "");
        if (detail[0]) fprintf(stderr, "]\n");
    }
    pthread_mutex_unlock(&harness_mutex);
}

int harness_failed(void) { return failed_count; }

int harness_report(void) {
    printf("%d passed, %d failed\n", passed_count, failed_count);
    return failed_count == 0 ? 0 : 1;
}

struct rank_args {
    shardopt_comm comm;
    int rank;
    rank_fn fn;
    void *arg;
};

static void *rank_main(void *p) {
    struct rank_args *a = (struct rank_args *)p;
    a->fn(a->comm, a->rank, a->arg);
    return NULL;
}

void run_ranks(int size, rank_fn fn, void *arg) {
    shardopt_comm comms[16];
    pthread_t threads[16];
    struct rank_args args[16];
    int r;
    if (size > 16 || shardopt_comm_create_inprocess(size, comms) != SHARDOPT_OK) {
        harness_record(0, __FILE__, __LINE__, "create in-process group", shardopt_last_error_message());
        return;
    }
    for (r = 0; r < size; ++r) {
        args[r].comm = comms[r];
        args[r].rank = r;
        args[r].fn = fn;
        args[r].arg = arg;
        pthread_create(&threads[r], NULL, rank_main, &args[r]);
    }
    for (r = 0; r < size; ++r) pthread_join(threads[r], NULL);
    for (r = 0; r < size; ++r) shardopt_comm_destroy(comms[r]);
}

void run_ranks_in_temp_dir(int size, rank_fn fn, const char *prefix) {
    char dir[256], command[300];
    snprintf(dir, sizeof dir, "/tmp/%s-XXXXXX", prefix);
    if (!mkdtemp(dir)) {
        harness_record(0, __FILE__, __LINE__, "mkdtemp", dir);
        return;
    }
    run_ranks(size, fn, dir);
    snprintf(command, sizeof command, "rm -rf '%s'", dir);
    harness_record(system(command) == 0, __FILE__, __LINE__, command, "");
}

shardopt_params make_params_a6_b3(void) {
    shardopt_params p = NULL;
    CHECK_OK(shardopt_params_create(SHARDOPT_F32, 0, &p));
    CHECK_OK(shardopt_params_add(p, "a", 6, 0, NULL));
    CHECK_OK(shardopt_params_end_bucket(p));
    CHECK_OK(shardopt_params_add(p, "b", 3, 0, NULL));
    return p;
}

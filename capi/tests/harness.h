/* A tiny C test harness: CHECK macros counting passes and failures (thread safe), and a runner
 * that drives the N ranks of an in-process group from N pthreads. */
#ifndef SHARDOPT_CAPI_TEST_HARNESS_H
#define SHARDOPT_CAPI_TEST_HARNESS_H

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "shardopt.h"

void harness_record(int ok, const char *file, int line, const char *what, const char *detail);
int harness_failed(void);
/* Prints "N passed, N failed" and returns the exit status. */
int harness_report(void);

#define CHECK(cond) harness_record((cond) != 0, __FILE__, __LINE__, #cond, "")
#define CHECK_OK(expr)                                                                                  \
    do {                                                                                                \
        shardopt_status s_ = (expr);                                                                    \
        harness_record(s_ == SHARDOPT_OK, __FILE__, __LINE__, #expr, shardopt_last_error_message());    \
    } while (0)
/* expr fails with `code` and the thread's last error message contains `text`. */
#define CHECK_ERR(expr, code, text)                                                                     \
    do {                                                                                                \
        shardopt_status s_ = (expr);                                                                    \
        const char *m_ = shardopt_last_error_message();                                                 \
        harness_record(s_ == (code) && strstr(m_, (text)) != NULL, __FILE__, __LINE__, #expr " -> " #code, m_); \
    } while (0)

/* Runs fn(comm, rank, arg) on `size` threads, one per rank of a fresh in-process group, and
 * destroys the group afterwards. */
typedef void (*rank_fn)(shardopt_comm comm, int rank, void *arg);
void run_ranks(int size, rank_fn fn, void *arg);
/* run_ranks with arg = the path of a fresh directory under /tmp (named after `prefix`), removed
 * with everything in it afterwards. */
void run_ranks_in_temp_dir(int size, rank_fn fn, const char *prefix);

/* The two-bucket layout of the optimizer tests, in f32: tensor "a", 6 elements (bucket 0), and
 * tensor "b", 3 elements (bucket 1). The caller destroys it. */
shardopt_params make_params_a6_b3(void);

#endif

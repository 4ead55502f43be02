/* The planner through the ABI: shardopt_plan_rank_memory equals every rank's
 * shardopt_optimizer_memory_stats (ZeRO-2 and FSDP on 3 ranks); a search on a GPU cluster puts
 * those that fit first, fastest first; zero means default in the cluster; bad input is
 * INVALID_ARGUMENT naming it. */
#include <string.h>

#include "harness.h"
#include "tests.h"

static void same_as_memory_stats(shardopt_comm comm, int rank, void *arg) {
    const shardopt_strategy strategy = *(const shardopt_strategy *)arg;
    shardopt_params params = make_params_a6_b3();
    shardopt_optimizer_options adam;
    shardopt_sharding_options sharding;
    shardopt_optimizer o = NULL;
    shardopt_memory_stats measured, planned;
    int32_t size = 0, b;
    CHECK_OK(shardopt_optimizer_options_init(&adam));
    CHECK_OK(shardopt_sharding_options_init(&sharding));
    sharding.strategy = strategy;
    CHECK_OK(shardopt_comm_size(comm, &size));
    CHECK_OK(shardopt_optimizer_create(comm, params, &adam, &sharding, NULL, &o));
    for (b = 0; b < 2; ++b) { /* a forward over the units, then a step */
        CHECK_OK(shardopt_optimizer_gather(o, b, NULL));
        CHECK_OK(shardopt_optimizer_release(o, b));
    }
    CHECK_OK(shardopt_optimizer_zero_grad(o));
    CHECK_OK(shardopt_optimizer_step(o, NULL));
    memset(&measured, 0, sizeof measured);
    memset(&planned, 0, sizeof planned);
    measured.struct_size = planned.struct_size = sizeof measured;
    CHECK_OK(shardopt_optimizer_memory_stats(o, &measured));
    CHECK_OK(shardopt_plan_rank_memory(params, &adam, &sharding, size, rank, &planned));
    CHECK(memcmp(&measured, &planned, sizeof measured) == 0);
    CHECK(planned.optimizer_state_bytes > 0);
    CHECK_OK(shardopt_optimizer_destroy(o));
    CHECK_OK(shardopt_params_destroy(params));
}

void test_plan(void) {
    shardopt_strategy strategies[] = {SHARDOPT_ZERO2, SHARDOPT_FSDP, SHARDOPT_DDP};
    shardopt_plan_request request;
    shardopt_plan_cluster cluster;
    shardopt_plan_entry entry, previous;
    shardopt_plan plan = NULL;
    int32_t count = 0, fitting = 0, i;
    for (i = 0; i < 3; ++i) run_ranks(3, same_as_memory_stats, &strategies[i]);

    /* 7e9 parameters on 8 x 80 GB: DDP (16 B a parameter) does not fit, ZeRO-2 and FSDP do. */
    memset(&request, 0, sizeof request);
    memset(&cluster, 0, sizeof cluster);
    request.struct_size = sizeof request;
    request.parameters = 7e9;
    request.compute_seconds = 2.0;
    cluster.struct_size = sizeof cluster;
    cluster.ranks_per_host = 8;
    cluster.memory = SHARDOPT_MEMORY_CUDA;
    cluster.device_memory_bytes = 80000000000ull;
    cluster.intra_bandwidth = 900e9;
    CHECK_OK(shardopt_plan_create(&request, &cluster, &plan));
    CHECK_OK(shardopt_plan_count(plan, &count, &fitting));
    CHECK(count > 4 && fitting > 0 && fitting < count);
    memset(&previous, 0, sizeof previous);
    for (i = 0; i < count; ++i) {
        memset(&entry, 0, sizeof entry);
        entry.struct_size = sizeof entry;
        CHECK_OK(shardopt_plan_entry_get(plan, i, &entry));
        CHECK(entry.fits == (i < fitting));
        CHECK(entry.step_seconds >= entry.compute_seconds);
        if (i > 0 && i < fitting) CHECK(entry.step_seconds >= previous.step_seconds);
        if (strcmp(entry.name, "ddp") == 0) CHECK(!entry.fits && entry.device_bytes == 112000000000ull);
        if (strcmp(entry.name, "fsdp") == 0) CHECK(entry.fits && entry.optimizer_state_bytes == 7000000000ull);
        previous = entry;
    }
    CHECK_ERR(shardopt_plan_entry_get(plan, count, &entry), SHARDOPT_ERR_INVALID_ARGUMENT, "out of range");
    CHECK_OK(shardopt_plan_destroy(plan));
    CHECK_OK(shardopt_plan_destroy(NULL));

    /* One candidate as given (search off). */
    {
        shardopt_sharding_options zero2;
        CHECK_OK(shardopt_sharding_options_init(&zero2));
        zero2.strategy = SHARDOPT_ZERO2;
        request.sharding = &zero2;
        request.search = SHARDOPT_DISABLE;
        CHECK_OK(shardopt_plan_create(&request, &cluster, &plan));
        CHECK_OK(shardopt_plan_count(plan, &count, NULL));
        CHECK(count == 1);
        entry.struct_size = sizeof entry;
        CHECK_OK(shardopt_plan_entry_get(plan, 0, &entry));
        CHECK(strcmp(entry.name, "zero2") == 0 && entry.strategy == SHARDOPT_ZERO2);
        CHECK_OK(shardopt_plan_destroy(plan));
        request.sharding = NULL;
        request.search = SHARDOPT_AUTO;
    }

    /* Bad input, named. */
    cluster.inter_bandwidth = -1;
    cluster.hosts = 2;
    CHECK_ERR(shardopt_plan_create(&request, &cluster, &plan), SHARDOPT_ERR_INVALID_ARGUMENT, "between hosts");
    cluster.inter_bandwidth = 0;
    cluster.device_memory_bytes = 0;
    CHECK_ERR(shardopt_plan_create(&request, &cluster, &plan), SHARDOPT_ERR_INVALID_ARGUMENT, "device_memory_bytes");
    cluster.device_memory_bytes = 80000000000ull;
    request.parameters = 0;
    CHECK_ERR(shardopt_plan_create(&request, &cluster, &plan), SHARDOPT_ERR_INVALID_ARGUMENT, "parameter count");
    request.parameters = 7e9;
    cluster.ranks_per_host = -8;
    CHECK_ERR(shardopt_plan_create(&request, &cluster, &plan), SHARDOPT_ERR_INVALID_ARGUMENT, "ranks_per_host");
    cluster.ranks_per_host = 8;
    cluster.profile_json = "{not json";
    CHECK_ERR(shardopt_plan_create(&request, &cluster, &plan), SHARDOPT_ERR_INVALID_ARGUMENT, "not JSON");
    CHECK_ERR(shardopt_plan_create(NULL, &cluster, &plan), SHARDOPT_ERR_INVALID_ARGUMENT, "NULL");
}

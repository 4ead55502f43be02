/* The C test groups of the ABI (one file each). */
#ifndef SHARDOPT_CAPI_TESTS_H
#define SHARDOPT_CAPI_TESTS_H
void test_basics(void);       /* version, status names, destroy(NULL), NULL handles, env */
void test_collectives(void);  /* blocking and async collectives, split, work handles, errors */
void test_options(void);      /* options structs: defaults, versioning, validation; params */
void test_defaults(void);     /* zero means default; switches and field_mask errors */
void test_knobs(void);        /* memory space errors, update_threads, overlap_param_gather, timings */
void test_registry(void);     /* experimental: in-process groups joined by name */
void test_optimizer(void);    /* creation, step protocol, FSDP states, parameters, state */
void test_optimize(void);     /* optimize() with a C callback, failing callbacks */
void test_strategies(void);   /* hybrid, Local SGD, accumulation, clipping */
void test_checkpoint(void);   /* save/load, serialize/deserialize, resume, errors */
void test_elastic(void);      /* elastic optimizers: resume at another world size, optimize, errors */
void test_compression(void);  /* compression options, add_matrix, bytes on the wire per method */
void test_offload(void);      /* ZeRO-Offload switches, memory stats' host fields; meaningless in host memory */
void test_pipeline(void);     /* experimental: pipeline stages as callbacks */
void test_async(void);        /* strategy ASYNC_SGD: staleness 0 is DDP, checkpoints, refusals */
void test_gpu(void);          /* GPU backends, CUDA streams, optimizers in CUDA memory */
void test_plan(void);         /* the planner: rank memory equals memory stats, search order, bad input */
/* The optimizer in CUDA memory on a GPU communicator of `backend` (world of one); nothing when
 * none can be created here. Returns 1 when it ran, 0 when no such communicator. */
int test_gpu_device_memory(const char *backend);
int header_compiles_as_cxx(void); /* from header_cxx.cpp */
#endif

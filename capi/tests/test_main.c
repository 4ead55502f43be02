/* C tests of the shardopt ABI. Prints "N passed, N failed"; exits non-zero on any failure. */
#include "harness.h"
#include "tests.h"

int main(void) {
    CHECK(header_compiles_as_cxx() == SHARDOPT_ABI_VERSION);
    test_basics();
    test_options();
    test_defaults();
    test_knobs();
    test_compression();
    test_offload();
    test_registry();
    test_collectives();
    test_optimizer();
    test_optimize();
    test_strategies();
    test_checkpoint();
    test_elastic();
    test_pipeline();
    test_async();
    test_gpu();
    test_plan();
    return harness_report();
}

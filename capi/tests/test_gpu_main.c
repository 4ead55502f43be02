/* test_capi_gpu_standin: test_gpu.c's checks of the optimizer in CUDA memory, with the C ABI's
 * sources and the core built against the CUDA stand-in (no GPU needed), on a staged communicator:
 * a world of one, or every process of a launcher's job (tools/shardopt-run -n 2 -- ...). NCCL is
 * not emulated, so only the staged backend is used. Prints "N passed, N failed"; exits non-zero
 * on any failure, or when the staged communicator cannot be created. */
#include "harness.h"
#include "tests.h"

int main(void) {
    CHECK(test_gpu_device_memory("staged") == 1);
    if (harness_failed()) fprintf(stderr, "[last error: %s]\n", shardopt_last_error_message());
    return harness_report();
}

// The GPU suite's entry point: without a usable CUDA device every test here is meaningless,
// so the binary exits 77, which ctest reports as "Skipped" (SKIP_RETURN_CODE 77).
#define BOOST_TEST_MODULE shardopt gpu
#define BOOST_TEST_NO_MAIN
#include <boost/test/unit_test.hpp>

#include <cuda_runtime_api.h>

#include <cstdio>

int main(int argc, char *argv[]) {
    int devices = 0;
    const cudaError_t status = cudaGetDeviceCount(&devices);
    if (status != cudaSuccess || devices == 0) {
        std::printf("no CUDA device (%s): GPU tests skipped\n",
                    status != cudaSuccess ? cudaGetErrorString(status) : "cudaGetDeviceCount found none");
        return 77;
    }
    return boost::unit_test::unit_test_main(&init_unit_test, argc, argv);
}

// Conformance runner for the GPU communicators: every process of the job runs this. It builds
// the named backend (nccl or staged) from the environment, wraps it in the test DeviceAdapter
// (the cases use host buffers; the adapter moves them through device memory) and runs every
// conformance case; failure cases run on a fresh split(0, rank) child. Exits 77 (skipped) where
// no CUDA device is visible, 1 when any case failed on this rank.
//
//   conformance_gpu_main --backend nccl|staged [--filter SUBSTRING] [--skip-failures]
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "conformance_runner.hpp"
#include "device_adapter.hpp"
#include "shardopt/ucx.hpp"

using namespace shardopt;
using namespace shardopt::conformance;

int main(int argc, char **argv) {
    RunOptions options;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--backend") && i + 1 < argc)
            options.label = argv[++i];
        else if (!std::strcmp(argv[i], "--filter") && i + 1 < argc)
            options.filter = argv[++i];
        else if (!std::strcmp(argv[i], "--skip-failures"))
            options.failures = false;
        else {
            std::fprintf(stderr, "usage: %s --backend nccl|staged [--filter SUBSTRING] [--skip-failures]\n", argv[0]);
            return 2;
        }
    }
    const std::string &backend = options.label;
    if (backend != "nccl" && backend != "staged") {
        std::fprintf(stderr, "--backend must be nccl or staged\n");
        return 2;
    }
    int devices = 0;
    const cudaError_t status = cudaGetDeviceCount(&devices);
    if (status != cudaSuccess || devices == 0) {
        std::printf("no CUDA device (%s): GPU conformance skipped\n",
                    status != cudaSuccess ? cudaGetErrorString(status) : "cudaGetDeviceCount found none");
        return 77;
    }
    options.start = std::chrono::steady_clock::now();
    CommunicatorPtr comm;
    try {
        comm = std::make_shared<gpu_test::DeviceAdapter>(create_communicator_from_env(backend));
    } catch (const std::exception &e) {
        std::fprintf(stderr, "cannot create the %s communicator: %s\n", backend.c_str(), e.what());
        return 1;
    }
    return run_conformance(*comm, options);
}

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

#include "conformance_cases.hpp"
#include "device_adapter.hpp"
#include "shardopt/ucx.hpp"

using namespace shardopt;
using namespace shardopt::conformance;

int main(int argc, char **argv) {
    std::string backend, filter;
    bool failures = true;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--backend") && i + 1 < argc)
            backend = argv[++i];
        else if (!std::strcmp(argv[i], "--filter") && i + 1 < argc)
            filter = argv[++i];
        else if (!std::strcmp(argv[i], "--skip-failures"))
            failures = false;
        else {
            std::fprintf(stderr, "usage: %s --backend nccl|staged [--filter SUBSTRING] [--skip-failures]\n", argv[0]);
            return 2;
        }
    }
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
    const auto start = std::chrono::steady_clock::now();
    CommunicatorPtr comm;
    try {
        comm = std::make_shared<gpu_test::DeviceAdapter>(create_communicator_from_env(backend));
    } catch (const std::exception &e) {
        std::fprintf(stderr, "cannot create the %s communicator: %s\n", backend.c_str(), e.what());
        return 1;
    }
    const int rank = comm->rank(), size = comm->size();
    int passed = 0, failed = 0;
    auto run_list = [&](const std::vector<Case> &cases, bool on_child) {
        for (const auto &c : cases) {
            if (size < c.min_size) continue;
            if (!filter.empty() && c.name.find(filter) == std::string::npos) continue;
            try {
                if (on_child) {
                    auto child = comm->split(0, rank);
                    c.run(*child);
                } else {
                    c.run(*comm);
                }
                ++passed;
            } catch (const std::exception &e) {
                ++failed;
                std::printf("FAIL %s (rank %d of %d, %s): %s\n", c.name.c_str(), rank, size, backend.c_str(), e.what());
                std::fflush(stdout);
                if (!comm->abort_reason().empty()) {
                    std::printf("the communicator is aborted; stopping\n");
                    return false;
                }
            }
        }
        return true;
    };
    bool ok = run_list(collective_cases(), false);
    if (ok && failures) ok = run_list(failure_cases(), true);
    if (ok) {
        try {
            comm->barrier();
        } catch (const std::exception &e) {
            std::printf("FAIL final barrier: %s\n", e.what());
            ++failed;
        }
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("rank %d/%d (%s): %d passed, %d failed in %.1f s\n", rank, size, backend.c_str(), passed, failed, secs);
    return failed || !ok ? 1 : 0;
}

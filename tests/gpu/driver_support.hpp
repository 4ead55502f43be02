// What the standalone GPU drivers (lowbit_engine_main, offload_main, sharded_device_main) share: a
// CUDA call's check, and the reason to skip (exit 77, which ctest reports as skipped) where the
// backend asked for cannot run here. Header-only: the drivers do not link gpu_support, which
// brings Boost.Test.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "shardopt/device_optimizer.hpp"
#include "shardopt/gpu_comm.hpp"

namespace shardopt::testing {

inline void cuda_ok(cudaError_t status, const char *what) {
    if (status != cudaSuccess)
        throw std::runtime_error(std::string(what) + ": " + cudaGetErrorName(status) + " (" +
                                 cudaGetErrorString(status) + ")");
}

// Ranks of this job on this host, from the launcher (as memory_plan's ranks_sharing_memory); 0 when it
// does not say.
inline int local_world_size(int world_size) {
    for (const char *name : {"SHARDOPT_LOCAL_WORLD_SIZE", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"})
        if (const char *v = std::getenv(name)) {
            const int n = std::atoi(v);
            if (n > 0) return n;
        }
    return world_size == 1 ? 1 : 0;
}

// 77, printing why, when `backend` (nccl or staged) cannot run `world_size` ranks here: no visible
// GPU, the backend not built or not loadable, or (NCCL) more ranks on this host than GPUs; else 0.
// Every rank of a job on one host sees the same devices and libraries, so every rank decides alike.
inline int gpu_skip_reason(const std::string &backend, const char *test, int world_size) {
    const int devices = cuda::device_count();
    if (devices == 0) {
        int raw = 0;
        const cudaError_t status = cudaGetDeviceCount(&raw);
        std::printf("SKIP no CUDA device visible (%s): the %s test needs one\n",
                    status != cudaSuccess ? cudaGetErrorString(status) : "cuda::device_count() is 0", test);
        return 77;
    }
    if (backend == "nccl" && !gpu::nccl_available()) {
        std::printf("SKIP the nccl backend is not available (built without NCCL, or libnccl.so.2 / "
                    "$SHARDOPT_NCCL_LIBRARY cannot be loaded)\n");
        return 77;
    }
    if (backend == "staged" && !gpu::staged_available()) {
        std::printf("SKIP the staged backend is not available (built without CUDA or UCX)\n");
        return 77;
    }
    if (backend == "nccl" && local_world_size(world_size) > devices) {
        std::printf("SKIP nccl needs one GPU per rank: %d ranks on this host, %d devices\n",
                    local_world_size(world_size), devices);
        return 77;
    }
    return 0;
}

} // namespace shardopt::testing

#include "cuda_device.hpp"

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda_check.hpp"
#include "shardopt/error.hpp"

namespace shardopt::cuda {

int device_count() noexcept {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        (void)cudaGetLastError(); // no driver or no GPU: not an error of the next CUDA call
        return 0;
    }
    return count;
}

namespace detail {

int resolve_device(int requested) {
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
        (void)cudaGetLastError();
        throw Error(ErrorCode::unsupported, std::string("no CUDA device can be used: cudaGetDeviceCount: ") +
                                                cudaGetErrorName(status) + ": " + cudaGetErrorString(status));
    }
    if (count == 0) throw Error(ErrorCode::unsupported, "no CUDA device can be used: cudaGetDeviceCount found none");
    if (requested == -1) {
        int current = 0;
        check(cudaGetDevice(&current), "cudaGetDevice");
        return current;
    }
    require(requested >= 0 && requested < count, ErrorCode::invalid_argument,
            "device " + std::to_string(requested) + " does not exist: " + std::to_string(count) +
                " CUDA device(s), ordinals 0.." + std::to_string(count - 1) + " (or -1 for the current one)");
    return requested;
}

DeviceGuard::DeviceGuard(int device) {
    check(cudaGetDevice(&previous_), "cudaGetDevice");
    if (previous_ != device) check(cudaSetDevice(device), "cudaSetDevice");
}

DeviceGuard::~DeviceGuard() {
    int current = -1;
    if (cudaGetDevice(&current) == cudaSuccess && current != previous_) (void)cudaSetDevice(previous_);
    (void)cudaGetLastError();
}

void require_device_memory(const void *ptr, std::size_t elem_size, int device, const std::string &what) {
    require(ptr != nullptr, ErrorCode::invalid_argument, what + " must not be null");
    require(reinterpret_cast<std::uintptr_t>(ptr) % elem_size == 0, ErrorCode::invalid_argument,
            what + " is not aligned to its element size (" + std::to_string(elem_size) + " bytes)");
    cudaPointerAttributes attributes{};
    check(cudaPointerGetAttributes(&attributes, ptr), ("cudaPointerGetAttributes of " + what).c_str());
    switch (attributes.type) {
    case cudaMemoryTypeManaged: return;
    case cudaMemoryTypeDevice:
        require(attributes.device == device, ErrorCode::invalid_argument,
                what + " is memory of device " + std::to_string(attributes.device) + ", not of device " +
                    std::to_string(device) + " that the optimizer runs on");
        return;
    default:
        throw Error(ErrorCode::invalid_argument,
                    what + " is host memory; the CUDA optimizer needs device (or managed) memory");
    }
}

} // namespace detail
} // namespace shardopt::cuda

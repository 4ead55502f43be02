#include "device_buffer.hpp"

#include <cuda_runtime_api.h>

#include <string>
#include <utility>

#include "cuda_check.hpp"

namespace shardopt::cuda::detail {

DeviceBuffer::DeviceBuffer(std::size_t bytes, const char *what) : bytes_(bytes) {
    if (bytes == 0) return;
    check(cudaMalloc(&ptr_, bytes), ("cudaMalloc of " + std::to_string(bytes) + " bytes for " + what).c_str());
}

DeviceBuffer::~DeviceBuffer() { release(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer &&other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer &DeviceBuffer::operator=(DeviceBuffer &&other) noexcept {
    if (this != &other) {
        release();
        ptr_ = std::exchange(other.ptr_, nullptr);
        bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
}

void DeviceBuffer::release() noexcept {
    // cudaFree waits for the device work still using the memory; a failure here (a context
    // already torn down at exit) leaves nothing to do.
    if (ptr_ != nullptr && cudaFree(ptr_) != cudaSuccess) (void)cudaGetLastError();
    ptr_ = nullptr;
    bytes_ = 0;
}

} // namespace shardopt::cuda::detail

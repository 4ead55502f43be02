#include "pinned_buffer.hpp"

#include <cuda_runtime_api.h>

#include <string>

#include "cuda_check.hpp"

namespace shardopt::cuda::detail {

PinnedBuffer::~PinnedBuffer() {
    if (ptr_) (void)cudaFreeHost(ptr_);
    (void)cudaGetLastError();
}

void *PinnedBuffer::reserve(std::size_t bytes) {
    if (bytes <= bytes_) return ptr_;
    // Grow geometrically: gradient buckets of slowly varying sizes pin memory only a few times.
    const std::size_t want = bytes > 2 * bytes_ ? bytes : 2 * bytes_;
    if (ptr_) (void)cudaFreeHost(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
    // Portable: usable from every device's context, whichever one the caller has current.
    check(cudaHostAlloc(&ptr_, want, cudaHostAllocPortable),
                        ("cudaHostAlloc of " + std::to_string(want) + " pinned bytes for staging").c_str());
    bytes_ = want;
    return ptr_;
}

} // namespace shardopt::cuda::detail

// PinnedBuffer: page-locked host memory that grows on demand. Copies between the device and
// pinned memory run asynchronously at full bus speed; pageable memory would be staged again by
// the driver.
#pragma once

#include <cstddef>

namespace shardopt::cuda::detail {

class PinnedBuffer {
  public:
    PinnedBuffer() = default;
    ~PinnedBuffer();
    PinnedBuffer(const PinnedBuffer &) = delete;
    PinnedBuffer &operator=(const PinnedBuffer &) = delete;

    // At least `bytes` of pinned memory (contents not kept when it grows). Throws
    // Error(out_of_memory) when the host cannot pin that much.
    void *reserve(std::size_t bytes);
    void *get() const noexcept { return ptr_; }

  private:
    void *ptr_ = nullptr;
    std::size_t bytes_ = 0;
};

} // namespace shardopt::cuda::detail

// An owned block of device memory (cudaMalloc / cudaFree), movable, never copied.
#pragma once

#include <cstddef>

namespace shardopt::cuda::detail {

class DeviceBuffer {
  public:
    DeviceBuffer() = default;
    // Throws Error(out_of_memory) naming `what` and the size when the device is full.
    DeviceBuffer(std::size_t bytes, const char *what);
    ~DeviceBuffer();
    DeviceBuffer(DeviceBuffer &&other) noexcept;
    DeviceBuffer &operator=(DeviceBuffer &&other) noexcept;
    DeviceBuffer(const DeviceBuffer &) = delete;
    DeviceBuffer &operator=(const DeviceBuffer &) = delete;

    void *get() const noexcept { return ptr_; }
    template <typename T> T *as() const noexcept { return static_cast<T *>(ptr_); }
    std::size_t bytes() const noexcept { return bytes_; }

  private:
    void release() noexcept;
    void *ptr_ = nullptr;
    std::size_t bytes_ = 0;
};

} // namespace shardopt::cuda::detail

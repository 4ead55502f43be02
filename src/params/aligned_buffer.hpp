// AlignedBuffer: a 64-byte aligned, zero-initialized byte buffer. Parameter, gradient and state
// storage use it so vector loads never straddle cache lines at the start of a buffer.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace shardopt {

class AlignedBuffer {
  public:
    AlignedBuffer() = default;
    explicit AlignedBuffer(std::size_t bytes) { resize(bytes); }
    ~AlignedBuffer() { std::free(data_); }
    AlignedBuffer(AlignedBuffer &&other) noexcept
        : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
    AlignedBuffer &operator=(AlignedBuffer &&other) noexcept {
        std::swap(data_, other.data_);
        std::swap(size_, other.size_);
        return *this;
    }
    AlignedBuffer(const AlignedBuffer &) = delete;
    AlignedBuffer &operator=(const AlignedBuffer &) = delete;

    // Reallocates (contents are not kept) and zeroes.
    void resize(std::size_t bytes) {
        std::free(data_);
        data_ = nullptr;
        size_ = 0;
        if (bytes == 0) return;
        const std::size_t rounded = (bytes + 63) / 64 * 64;
        data_ = static_cast<unsigned char *>(std::aligned_alloc(64, rounded));
        if (!data_) throw std::bad_alloc();
        std::memset(data_, 0, rounded);
        size_ = bytes;
    }
    void release() { resize(0); }
    void zero() {
        if (size_) std::memset(data_, 0, size_);
    }

    unsigned char *data() noexcept { return data_; }
    const unsigned char *data() const noexcept { return data_; }
    std::size_t size() const noexcept { return size_; }
    bool empty() const noexcept { return size_ == 0; }

  private:
    unsigned char *data_ = nullptr;
    std::size_t size_ = 0;
};

} // namespace shardopt

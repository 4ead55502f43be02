// Byte sources and sinks for checkpoint files: where a checkpoint is read from (a file, or bytes
// in memory for deserialize) and written to (a file descriptor, or a growing buffer for
// serialize). Reads are bounds-checked against the source's size before anything is allocated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "../little_endian.hpp"

namespace shardopt::checkpoint {

class ByteSource {
  public:
    virtual ~ByteSource() = default;
    virtual std::uint64_t size() const = 0;
    // Reads exactly n bytes at offset; throws Error(corrupt) when that runs past the end and
    // Error(io) when the file system fails.
    virtual void read(std::uint64_t offset, void *dst, std::size_t n) const = 0;
    // For error messages: the file name, or "serialized checkpoint".
    virtual const std::string &name() const = 0;
};

class MemorySource final : public ByteSource {
  public:
    MemorySource(const void *data, std::size_t size, std::string name = "serialized checkpoint");
    std::uint64_t size() const override { return size_; }
    void read(std::uint64_t offset, void *dst, std::size_t n) const override;
    const std::string &name() const override { return name_; }

  private:
    const unsigned char *data_;
    std::size_t size_;
    std::string name_;
};

class FileSource final : public ByteSource {
  public:
    // Throws Error(io) naming the file when it cannot be opened (missing, unreadable).
    explicit FileSource(const std::string &path);
    ~FileSource() override;
    FileSource(const FileSource &) = delete;
    FileSource &operator=(const FileSource &) = delete;
    std::uint64_t size() const override { return size_; }
    void read(std::uint64_t offset, void *dst, std::size_t n) const override;
    const std::string &name() const override { return path_; }

  private:
    std::string path_;
    int fd_ = -1;
    std::uint64_t size_ = 0;
};

class ByteSink {
  public:
    virtual ~ByteSink() = default;
    virtual void write(const void *data, std::size_t n) = 0;
};

class VectorSink final : public ByteSink {
  public:
    explicit VectorSink(std::vector<unsigned char> &out) : out_(out) {}
    void write(const void *data, std::size_t n) override;

  private:
    std::vector<unsigned char> &out_;
};

// Calls a function with each piece (serialize's stream form).
class FunctionSink final : public ByteSink {
  public:
    explicit FunctionSink(std::function<void(const void *, std::size_t)> write) : write_(std::move(write)) {}
    void write(const void *data, std::size_t n) override { write_(data, n); }

  private:
    std::function<void(const void *, std::size_t)> write_;
};

// Little-endian fixed-width integers (the file format is little-endian on every host).
using shardopt::get_u32;
using shardopt::get_u64;
using shardopt::put_u32;
using shardopt::put_u64;

} // namespace shardopt::checkpoint

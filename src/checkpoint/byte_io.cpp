#include "byte_io.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardopt/error.hpp"

namespace shardopt::checkpoint {

namespace {
void check_range(const std::string &name, std::uint64_t size, std::uint64_t offset, std::size_t n) {
    if (offset > size || n > size - offset)
        throw Error(ErrorCode::corrupt, name + ": truncated: needs bytes [" + std::to_string(offset) + ", " +
                                            std::to_string(offset + n) + ") but has only " + std::to_string(size));
}
} // namespace

MemorySource::MemorySource(const void *data, std::size_t size, std::string name)
    : data_(static_cast<const unsigned char *>(data)), size_(size), name_(std::move(name)) {
    require(data_ != nullptr || size_ == 0, ErrorCode::invalid_argument, "deserialize: null buffer");
}

void MemorySource::read(std::uint64_t offset, void *dst, std::size_t n) const {
    check_range(name_, size_, offset, n);
    if (n) std::memcpy(dst, data_ + offset, n);
}

FileSource::FileSource(const std::string &path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw Error(ErrorCode::io, "cannot open '" + path + "': " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
        const int e = errno;
        ::close(fd_);
        fd_ = -1;
        throw Error(ErrorCode::io, "'" + path + "' is not a readable regular file" +
                                       (e ? std::string(": ") + std::strerror(e) : std::string()));
    }
    size_ = std::uint64_t(st.st_size);
}

FileSource::~FileSource() {
    if (fd_ >= 0) ::close(fd_);
}

void FileSource::read(std::uint64_t offset, void *dst, std::size_t n) const {
    check_range(path_, size_, offset, n);
    auto *out = static_cast<unsigned char *>(dst);
    while (n > 0) {
        const ssize_t got = ::pread(fd_, out, n, off_t(offset));
        if (got < 0) {
            if (errno == EINTR) continue;
            throw Error(ErrorCode::io, "reading '" + path_ + "': " + std::strerror(errno));
        }
        if (got == 0) throw Error(ErrorCode::corrupt, path_ + ": truncated while reading (file shrank)");
        out += got;
        offset += std::uint64_t(got);
        n -= std::size_t(got);
    }
}

void VectorSink::write(const void *data, std::size_t n) {
    const auto *p = static_cast<const unsigned char *>(data);
    out_.insert(out_.end(), p, p + n);
}

} // namespace shardopt::checkpoint

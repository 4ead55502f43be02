#include "atomic_file.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardopt/error.hpp"

namespace shardopt::checkpoint {

namespace {

[[noreturn]] void io_error(const std::string &what, const std::string &path, int err) {
    throw Error(ErrorCode::io, what + " '" + path + "': " + std::strerror(err));
}

class FdSink final : public ByteSink {
  public:
    FdSink(int fd, const std::string &path) : fd_(fd), path_(path) {}
    void write(const void *data, std::size_t n) override {
        const auto *p = static_cast<const unsigned char *>(data);
        while (n > 0) {
            const ssize_t put = ::write(fd_, p, std::min<std::size_t>(n, std::size_t(1) << 30));
            if (put < 0) {
                if (errno == EINTR) continue;
                io_error("cannot write", path_, errno);
            }
            p += put;
            n -= std::size_t(put);
        }
    }

  private:
    int fd_;
    const std::string &path_;
};

std::string parent_of(const std::string &path) {
    const auto slash = path.find_last_of('/');
    if (slash == std::string::npos) return ".";
    if (slash == 0) return "/";
    return path.substr(0, slash);
}

} // namespace

std::string join_path(const std::string &dir, const std::string &name) {
    if (dir.empty()) return name;
    return dir.back() == '/' ? dir + name : dir + "/" + name;
}

bool is_directory(const std::string &path) noexcept {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

void make_directories(const std::string &dir) {
    if (dir.empty() || is_directory(dir)) return;
    const std::string parent = parent_of(dir);
    if (parent != dir && !parent.empty()) make_directories(parent);
    if (::mkdir(dir.c_str(), 0777) != 0 && errno != EEXIST) io_error("cannot create directory", dir, errno);
    if (!is_directory(dir)) throw Error(ErrorCode::io, "cannot create directory '" + dir + "': a file is in the way");
}

void fsync_directory(const std::string &dir) {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) io_error("cannot open directory", dir, errno);
    if (::fsync(fd) != 0 && errno != EINVAL) { // some file systems cannot fsync directories
        const int e = errno;
        ::close(fd);
        io_error("cannot fsync directory", dir, e);
    }
    ::close(fd);
}

std::vector<std::string> list_directory(const std::string &dir) {
    std::vector<std::string> names;
    DIR *d = ::opendir(dir.c_str());
    if (!d) return names;
    while (const dirent *e = ::readdir(d)) {
        const std::string name = e->d_name;
        if (name != "." && name != "..") names.push_back(name);
    }
    ::closedir(d);
    return names;
}

void remove_file_quietly(const std::string &path) noexcept { ::unlink(path.c_str()); }

void write_file_atomically(const std::string &path, const std::function<void(ByteSink &)> &body) {
    static std::atomic<unsigned> counter{0};
    const std::string dir = parent_of(path);
    const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) io_error("cannot create", tmp, errno);
    bool closed = false;
    try {
        FdSink sink(fd, tmp);
        body(sink);
        test_delay_point();
        if (::fsync(fd) != 0) io_error("cannot fsync", tmp, errno);
        closed = true;
        if (::close(fd) != 0) io_error("cannot close", tmp, errno);
    } catch (...) {
        if (!closed) ::close(fd);
        remove_file_quietly(tmp);
        throw;
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
        const int e = errno;
        remove_file_quietly(tmp);
        io_error("cannot rename into place", path, e);
    }
    fsync_directory(dir);
}

PositionalFile::PositionalFile(const std::string &path, const std::string &tag, Mode mode, std::uint64_t size)
    : path_(path), tmp_(path + ".tmp." + tag), creator_(mode == Mode::create) {
    fd_ = ::open(tmp_.c_str(), creator_ ? O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC : O_WRONLY | O_CLOEXEC, 0644);
    if (fd_ < 0) io_error(creator_ ? "cannot create" : "cannot open", tmp_, errno);
    if (creator_ && ::ftruncate(fd_, off_t(size)) != 0) {
        const int e = errno;
        discard();
        io_error("cannot size", tmp_, e);
    }
}

PositionalFile::~PositionalFile() {
    if (fd_ >= 0) ::close(fd_);
    if (creator_ && !published_) remove_file_quietly(tmp_);
}

void PositionalFile::write_at(std::uint64_t offset, const void *data, std::size_t n) {
    const auto *p = static_cast<const unsigned char *>(data);
    while (n > 0) {
        const ssize_t put = ::pwrite(fd_, p, std::min<std::size_t>(n, std::size_t(1) << 30), off_t(offset));
        if (put < 0) {
            if (errno == EINTR) continue;
            io_error("cannot write", tmp_, errno);
        }
        p += put;
        offset += std::uint64_t(put);
        n -= std::size_t(put);
    }
}

void PositionalFile::sync() {
    if (::fsync(fd_) != 0) io_error("cannot fsync", tmp_, errno);
}

void PositionalFile::close() {
    if (fd_ < 0) return;
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) io_error("cannot close", tmp_, errno);
}

void PositionalFile::publish() {
    close();
    if (::rename(tmp_.c_str(), path_.c_str()) != 0) io_error("cannot rename into place", path_, errno);
    published_ = true;
    fsync_directory(parent_of(path_));
}

void PositionalFile::discard() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    if (creator_ && !published_) remove_file_quietly(tmp_);
    published_ = true; // nothing left to remove
}

} // namespace shardopt::checkpoint

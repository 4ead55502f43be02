// Atomic file replacement: the new content is written to a temporary file in the target's
// directory, flushed (fsync), renamed over the target, and the directory is fsynced, so after a
// crash the target holds either the old or the new content, never a mix.
//
// Test hook (test build of the core only, src/test_hooks): SHARDOPT_CHECKPOINT_TEST_DELAY_MS=n
// sleeps n ms after the data is written and before the rename, so a test can kill a save while
// files are half written.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "byte_io.hpp"

namespace shardopt::checkpoint {

// Throws Error(io) naming the path and the system error; the temporary file is removed.
void write_file_atomically(const std::string &path, const std::function<void(ByteSink &)> &body);

// The same replacement for a file written at offsets, possibly by several processes at once: the
// creator makes the temporary file `path.tmp.<tag>` at its final size, the others open it, each
// writes its byte ranges (write_at) and flushes them (sync); then the creator alone publishes it
// (rename over `path`, fsync of the directory). Until publish(), the destructor of the creator's
// object removes the temporary file (an error or an exception midway leaves `path` as it was).
class PositionalFile {
  public:
    enum class Mode { create, open };
    PositionalFile(const std::string &path, const std::string &tag, Mode mode, std::uint64_t size = 0);
    ~PositionalFile();
    PositionalFile(const PositionalFile &) = delete;
    PositionalFile &operator=(const PositionalFile &) = delete;

    void write_at(std::uint64_t offset, const void *data, std::size_t n);
    void sync(); // fsync this process's writes
    void close();
    // Creator only, after every writer has synced: rename into place, fsync the directory.
    void publish();
    // Creator only: remove the temporary file now (also done by the destructor until publish()).
    void discard() noexcept;
    const std::string &temp_path() const noexcept { return tmp_; }

  private:
    std::string path_, tmp_;
    int fd_ = -1;
    bool creator_ = false, published_ = false;
};

void make_directories(const std::string &dir);     // mkdir -p; Error(io) on failure
void fsync_directory(const std::string &dir);      // Error(io) on failure
std::vector<std::string> list_directory(const std::string &dir); // names, no "." / ".."
void remove_file_quietly(const std::string &path) noexcept;
bool is_directory(const std::string &path) noexcept;
std::string join_path(const std::string &dir, const std::string &name);
// The injected delay (SHARDOPT_CHECKPOINT_TEST_DELAY_MS) in the test build; nothing in the
// shipped library.
void test_delay_point();

} // namespace shardopt::checkpoint

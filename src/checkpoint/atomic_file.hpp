// Atomic file replacement: the new content is written to a temporary file in the target's
// directory, flushed (fsync), renamed over the target, and the directory is fsynced, so after a
// crash the target holds either the old or the new content, never a mix.
//
// Test hook (test build of the core only, src/test_hooks): SHARDOPT_CHECKPOINT_TEST_DELAY_MS=n
// sleeps n ms after the data is written and before the rename, so a test can kill a save while
// files are half written.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "byte_io.hpp"

namespace shardopt::checkpoint {

// Throws Error(io) naming the path and the system error; the temporary file is removed.
void write_file_atomically(const std::string &path, const std::function<void(ByteSink &)> &body);

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

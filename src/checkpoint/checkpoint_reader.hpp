// Opening a checkpoint for reading, with or without a job (load.cpp, offline.cpp): the manifest
// (or the serialized bytes), and for the sharded form every shard file, each frame and header
// validated and checked against the manifest, their segments indexed for resharding.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "manifest.hpp"
#include "resharding.hpp"

namespace shardopt::checkpoint {

struct OpenCheckpoint {
    Manifest meta;
    std::unique_ptr<SegmentIndex> index;
    std::string manifest_path;      // "serialized checkpoint" for bytes
    std::string base_dir;           // where the files it names are
    std::uint32_t format_version = 1; // of the manifest (or consolidated) file
    std::vector<std::string> files; // every file read, the manifest first
};

// From the directory or manifest file `dir`, or from `bytes` when not null (serialize()'s bytes:
// consolidated only). `first_rank(meta)`: the rank whose shard file is preferred where files
// overlap (LocalSGD's replicas at the same world size), or -1. `check(open)`: called once the
// manifest is read, before any other file is (a load's checks of the layout and optimizer come
// before the checks of the files). Error(io | corrupt | invalid_argument) naming the file and what
// is wrong.
OpenCheckpoint open_checkpoint(const std::string &dir, const void *bytes, std::size_t size,
                               const std::function<int(const Manifest &)> &first_rank = {},
                               const std::function<void(const OpenCheckpoint &)> &check = {});

} // namespace shardopt::checkpoint

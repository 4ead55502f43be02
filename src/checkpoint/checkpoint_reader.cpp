#include "checkpoint_reader.hpp"

#include <algorithm>

#include "atomic_file.hpp"
#include "container_format.hpp"
#include "shardopt/error.hpp"

namespace shardopt::checkpoint {

OpenCheckpoint open_checkpoint(const std::string &dir, const void *bytes, std::size_t size,
                               const std::function<int(const Manifest &)> &first_rank,
                               const std::function<void(const OpenCheckpoint &)> &check) {
    OpenCheckpoint out;
    std::shared_ptr<ByteSource> msource;
    if (bytes) {
        msource = std::make_shared<MemorySource>(bytes, size);
    } else {
        require(!dir.empty(), ErrorCode::invalid_argument, "load: empty checkpoint path");
        std::string manifest_path = dir;
        out.base_dir = dir;
        if (is_directory(dir)) {
            manifest_path = join_path(dir, kManifestFile);
        } else {
            const auto slash = dir.find_last_of('/');
            out.base_dir = slash == std::string::npos ? "." : dir.substr(0, slash + 1);
        }
        try {
            msource = std::make_shared<FileSource>(manifest_path);
        } catch (const Error &e) {
            throw Error(ErrorCode::io, std::string("no checkpoint at '") + dir + "': " + e.what());
        }
    }
    out.manifest_path = msource->name();
    out.files.push_back(out.manifest_path);
    auto mcontainer = std::make_shared<Container>(read_container(*msource));
    out.format_version = mcontainer->version;
    out.meta = manifest_from_json(mcontainer->header, msource->name());
    const Manifest &meta = out.meta;
    if (bytes && meta.kind != "consolidated")
        throw Error(ErrorCode::invalid_argument,
                    "deserialize: these bytes are a sharded checkpoint's manifest, not a serialized checkpoint");
    if (check) check(out);
    out.index = std::make_unique<SegmentIndex>(meta.layout);
    if (meta.kind == "consolidated") {
        // A saved consolidated checkpoint's parameters lie in its model.<generation>.safetensors.
        SegmentIndex::FileOpener open;
        if (!bytes)
            open = [&](const std::string &name) -> std::shared_ptr<const ByteSource> {
                const std::string path = join_path(out.base_dir, name);
                try {
                    auto file = std::make_shared<FileSource>(path);
                    out.files.push_back(path);
                    return file;
                } catch (const Error &e) {
                    throw Error(ErrorCode::io, "checkpoint file '" + name + "' is missing or unreadable: " + e.what());
                }
            };
        out.index->add(msource, mcontainer, open);
        return out;
    }
    std::vector<ShardFileInfo> files = meta.files;
    const int first = first_rank ? first_rank(meta) : -1;
    if (first >= 0)
        std::stable_partition(files.begin(), files.end(), [&](const ShardFileInfo &f) { return f.rank == first; });
    for (const auto &f : files) {
        const std::string path = join_path(out.base_dir, f.name);
        std::shared_ptr<ByteSource> source;
        try {
            source = std::make_shared<FileSource>(path);
        } catch (const Error &e) {
            throw Error(ErrorCode::io, "checkpoint shard of rank " + std::to_string(f.rank) + " of " +
                                           std::to_string(meta.world_size) + " is missing or unreadable: " + e.what());
        }
        if (source->size() != f.bytes)
            throw Error(ErrorCode::corrupt, path + ": shard file is " + std::to_string(source->size()) +
                                                " bytes but the manifest recorded " + std::to_string(f.bytes) +
                                                (source->size() < f.bytes ? " (truncated)" : ""));
        auto container = std::make_shared<Container>(read_container(*source));
        if (container->header_xxh3 != f.header_xxh3)
            throw Error(ErrorCode::corrupt, path + ": shard file does not belong to this checkpoint (its header checksum "
                                                   "differs from the manifest's)");
        out.files.push_back(path);
        out.index->add(source, container);
    }
    return out;
}

} // namespace shardopt::checkpoint

// load() and deserialize(): a checkpoint of either form, saved at any world size and strategy,
// validated whole and staged on every rank before any rank changes anything (resharding.hpp
// reads each part's segments wherever they are).
#include <algorithm>
#include <cmath>

#include "atomic_file.hpp"
#include "checkpoint_target.hpp"
#include "collective_errors.hpp"
#include "container_format.hpp"
#include "resharding.hpp"
#include "stage_layouts.hpp"
#include "target_manifest.hpp"
#include "shardopt/error.hpp"

namespace shardopt::checkpoint {

void deserialize(CheckpointTarget &target, const void *data, std::size_t size) {
    require(data != nullptr || size == 0, ErrorCode::invalid_argument, "deserialize: null buffer with a nonzero size");
    load(target, std::string(), data ? data : "", size);
}

void load(CheckpointTarget &target, const std::string &dir, const void *bytes, std::size_t size) {
    Communicator &world = target.world();
    const ParameterSet &layout = target.layout();
    const OptimizerKind kind = target.optimizer_options().kind;
    const int slots = target.state_slots();
    const std::size_t elem = layout.element_size();
    // New contents are staged here and committed only when every rank has all of them.
    std::vector<unsigned char> new_params;
    std::vector<std::vector<unsigned char>> new_state;
    std::vector<unsigned char> new_rank_state;
    bool has_rank_state = false;
    Manifest meta;
    ModelLayout model;
    run_agreed(world, [&] { check_checkpointable(target, bytes ? "deserialize" : "load"); });
    run_agreed(world, [&] { model = model_layout(world, target.placement(), layout); }); // collective
    run_agreed(world, [&] {
        std::shared_ptr<ByteSource> msource;
        std::string base_dir;
        if (bytes) {
            msource = std::make_shared<MemorySource>(bytes, size);
        } else {
            require(!dir.empty(), ErrorCode::invalid_argument, "load: empty checkpoint path");
            std::string manifest_path = dir;
            base_dir = dir;
            if (is_directory(dir)) {
                manifest_path = join_path(dir, kManifestFile);
            } else {
                const auto slash = dir.find_last_of('/');
                base_dir = slash == std::string::npos ? "." : dir.substr(0, slash + 1);
            }
            try {
                msource = std::make_shared<FileSource>(manifest_path);
            } catch (const Error &e) {
                throw Error(ErrorCode::io, std::string("no checkpoint at '") + dir + "': " + e.what());
            }
        }
        auto mcontainer = std::make_shared<Container>(read_container(*msource));
        meta = manifest_from_json(mcontainer->header, msource->name());
        if (bytes && meta.kind != "consolidated")
            throw Error(ErrorCode::invalid_argument,
                        "deserialize: these bytes are a sharded checkpoint's manifest, not a serialized checkpoint");
        // By name: a checkpoint of pipeline stages loads into another depth or a whole-model optimizer.
        const std::vector<int> saved_index = match_tensors(meta.layout, layout_info(layout), model.info.tensors.size());
        require(meta.optimizer_kind == int(kind), ErrorCode::invalid_argument,
                std::string("checkpoint was saved by a ") + optimizer_kind_name(OptimizerKind(meta.optimizer_kind)) +
                    " optimizer (kind " + std::to_string(meta.optimizer_kind) + "), this optimizer is " +
                    optimizer_kind_name(kind));
        require(meta.state_slots == slots, ErrorCode::invalid_argument,
                "checkpoint holds " + std::to_string(meta.state_slots) + " optimizer state arrays per element, this " +
                    optimizer_kind_name(kind) + " optimizer uses " + std::to_string(slots) +
                    " (momentum/amsgrad/centered options differ)");
        require(std::isfinite(meta.lr) && meta.lr >= 0.0, ErrorCode::corrupt,
                msource->name() + ": learning rate " + std::to_string(meta.lr) + " is not valid");

        SegmentIndex index(meta.layout);
        if (meta.kind == "consolidated") {
            // A saved consolidated checkpoint's parameters lie in its model.<generation>.safetensors.
            SegmentIndex::FileOpener open;
            if (!bytes)
                open = [&](const std::string &name) -> std::shared_ptr<const ByteSource> {
                    try {
                        return std::make_shared<FileSource>(join_path(base_dir, name));
                    } catch (const Error &e) {
                        throw Error(ErrorCode::io, "checkpoint file '" + name + "' is missing or unreadable: " + e.what());
                    }
                };
            index.add(msource, mcontainer, open);
        } else {
            // LocalSGD keeps one replica per rank: at the same world size each rank takes its own.
            std::vector<ShardFileInfo> files = meta.files;
            if (target.sharding().strategy == Strategy::local_sgd && meta.world_size == world.size())
                std::stable_partition(files.begin(), files.end(),
                                      [&](const ShardFileInfo &f) { return f.rank == world.rank(); });
            for (const auto &f : files) {
                const std::string path = join_path(base_dir, f.name);
                std::shared_ptr<ByteSource> source;
                try {
                    source = std::make_shared<FileSource>(path);
                } catch (const Error &e) {
                    throw Error(ErrorCode::io, "checkpoint shard of rank " + std::to_string(f.rank) + " of " +
                                                   std::to_string(meta.world_size) + " is missing or unreadable: " +
                                                   e.what());
                }
                if (source->size() != f.bytes)
                    throw Error(ErrorCode::corrupt, path + ": shard file is " + std::to_string(source->size()) +
                                                        " bytes but the manifest recorded " + std::to_string(f.bytes) +
                                                        (source->size() < f.bytes ? " (truncated)" : ""));
                auto container = std::make_shared<Container>(read_container(*source));
                if (container->header_xxh3 != f.header_xxh3)
                    throw Error(ErrorCode::corrupt,
                                path + ": shard file does not belong to this checkpoint (its header checksum differs "
                                       "from the manifest's)");
                index.add(source, container);
            }
        }

        // Stage: start from the current storage (padding and anything not owned stay as they are).
        const unsigned char *current = target.host_part(-1);
        new_params.assign(current, current + target.part_elements(-1) * elem);
        for (int k = 0; k < slots; ++k) {
            current = target.host_part(k);
            new_state.emplace_back(current, current + target.part_elements(k) * elem);
        }
        const Placement &placement = target.placement();
        const std::vector<OwnedSegment> whole = whole_tensors(layout);
        for (int k = -1; k < slots; ++k) {
            const bool sharded = k < 0 ? placement.params_sharded : placement.state_sharded;
            unsigned char *base = k < 0 ? new_params.data() : new_state[std::size_t(k)].data();
            for (const auto &s : sharded ? target.chunk_segments() : whole)
                index.read(part_name(k), saved_index[std::size_t(s.tensor)], s.flat - layout.tensor(s.tensor).offset,
                           s.count, base + (sharded ? s.local : s.flat) * elem);
        }
        // A rank's own state only means something to the same rank of the same world.
        if (meta.world_size == world.size())
            has_rank_state = index.read_rank_state(rank_state_part(world.rank()), new_rank_state);
    });
    // Commit: every rank has everything.
    target.commit(new_params, new_state, meta.step_count, meta.lr, has_rank_state ? &new_rank_state : nullptr);
}

} // namespace shardopt::checkpoint

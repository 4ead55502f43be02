// The checkpoint operations (checkpoint_target.hpp): what each rank writes and reads, in terms of
// the engine's storage (params, state slots, owned chunk segments) as a CheckpointTarget shows
// it. The file format, manifest,
// atomic writes, resharding and error agreement live in src/checkpoint/.
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>

#include "atomic_file.hpp"
#include "checkpoint_target.hpp"
#include "collective_errors.hpp"
#include "container_format.hpp"
#include "manifest.hpp"
#include "resharding.hpp"
#include "safetensors_writer.hpp"
#include "stage_layouts.hpp"
#include "shardopt/error.hpp"

namespace shardopt {
namespace checkpoint {
namespace {

class CountingSink final : public ByteSink {
  public:
    explicit CountingSink(ByteSink &inner) : inner_(inner) {}
    void write(const void *data, std::size_t n) override {
        inner_.write(data, n);
        bytes += n;
    }
    std::uint64_t bytes = 0;

  private:
    ByteSink &inner_;
};

LayoutInfo layout_info(const ParameterSet &ps) {
    LayoutInfo info;
    info.dtype = ps.dtype();
    for (const auto &t : ps.tensors()) info.tensors.push_back({t.name, t.count});
    return info;
}

nlohmann::json optimizer_json(const OptimizerOptions &o) {
    return {{"kind", int(o.kind)},
            {"kind_name", optimizer_kind_name(o.kind)},
            {"lr", o.lr},
            {"weight_decay", o.weight_decay},
            {"maximize", o.maximize},
            {"momentum", o.momentum},
            {"dampening", o.dampening},
            {"nesterov", o.nesterov},
            {"beta1", o.beta1},
            {"beta2", o.beta2},
            {"eps", o.eps},
            {"amsgrad", o.amsgrad},
            {"alpha", o.alpha},
            {"centered", o.centered},
            {"lr_decay", o.lr_decay},
            {"initial_accumulator_value", o.initial_accumulator_value}};
}

nlohmann::json sharding_json(const ShardingOptions &o, std::int64_t step_count) {
    return {{"strategy", strategy_name(o.strategy)},
            {"gradient_accumulation_steps", o.gradient_accumulation_steps},
            {"max_grad_norm", o.max_grad_norm},
            {"skip_nonfinite", o.skip_nonfinite},
            {"staging_buffers", o.staging_buffers},
            {"fsdp_prefetch", o.fsdp_prefetch},
            {"pipeline_parallel_size", o.pipeline_parallel_size},
            {"tensor_parallel_size", o.tensor_parallel_size},
            {"data_parallel_size", o.data_parallel_size},
            {"hybrid_data_strategy", strategy_name(o.hybrid_data_strategy)},
            {"hsdp_replicas", o.hsdp_replicas},
            {"local_sgd_period", o.local_sgd_period},
            {"local_sgd_position", o.local_sgd_period > 0 ? step_count % o.local_sgd_period : 0}};
}

std::string new_generation() {
    std::random_device rd;
    const std::uint64_t t = std::uint64_t(std::chrono::system_clock::now().time_since_epoch().count());
    const std::uint64_t r = (std::uint64_t(rd()) << 32) ^ std::uint64_t(rd());
    return hex64(xxh3(&t, sizeof t) ^ r);
}

std::string part_name(int state_slot) { return state_slot < 0 ? "param" : "state." + std::to_string(state_slot); }
// The part holding world rank r's rank state.
std::string rank_state_part(int rank) { return std::string(SegmentIndex::kRankStatePrefix) + std::to_string(rank); }

bool host_is_little_endian() {
    const std::uint32_t one = 1;
    unsigned char first;
    std::memcpy(&first, &one, 1);
    return first == 1;
}

void check_checkpointable(const CheckpointTarget &target, const char *what) {
    require(host_is_little_endian(), ErrorCode::unsupported, "checkpoints need a little-endian host");
    require(target.placement().tp_size == 1, ErrorCode::unsupported,
            std::string(what) + ": checkpoints of hybrid grids with tensor parallelism are not supported "
                                "(tensors split across ranks); pipeline stages are");
    require(target.micro_step() == 0, ErrorCode::invalid_state,
            std::string(what) + ": refused in the middle of gradient accumulation (" +
                std::to_string(target.micro_step()) + " of " +
                std::to_string(target.sharding().gradient_accumulation_steps) +
                " micro-steps done); call it after the step() that applies the update");
}

// The manifest fields every form shares.
Manifest manifest_of(const CheckpointTarget &target, int world_size) {
    const OptimizerOptions &optimizer = target.optimizer_options();
    Manifest manifest;
    manifest.layout = layout_info(target.layout());
    manifest.world_size = world_size;
    manifest.step_count = target.step_count();
    manifest.state_slots = target.state_slots();
    manifest.optimizer_kind = int(optimizer.kind);
    manifest.lr = optimizer.lr;
    manifest.optimizer = optimizer_json(optimizer);
    manifest.sharding = sharding_json(target.sharding(), target.step_count());
    return manifest;
}

} // namespace

std::size_t CheckpointTarget::part_elements(int k) const {
    const bool sharded = k < 0 ? placement().params_sharded : placement().state_sharded;
    return sharded ? layout().shard_count() : layout().padded_count();
}

void save(CheckpointTarget &target, const std::string &dir, CheckpointForm form) {
    Communicator &world = target.world();
    const ParameterSet &layout = target.layout();
    run_agreed(world, [&] {
        require(form == CheckpointForm::sharded || form == CheckpointForm::consolidated, ErrorCode::invalid_argument,
                "save: invalid checkpoint form");
    });
    if (form == CheckpointForm::sharded) {
        // The three parts of an asynchronous save, run back to back over the target's own memory.
        const std::unique_ptr<ShardedSave> save = begin_sharded_save(target, dir, false);
        write_shard(*save);
        test_delay_point();
        publish_sharded_save(world, *save);
        return;
    }
    run_agreed(world, [&] {
        require(!dir.empty(), ErrorCode::invalid_argument, "save: empty checkpoint directory");
        check_checkpointable(target, "save");
    });
    const std::size_t elem = layout.element_size();
    const std::int64_t step_count = target.step_count();
    // Pipeline stages: the manifest and every shard file describe the whole model.
    ModelLayout model;
    run_agreed(world, [&] { model = model_layout(world, target.placement(), layout); });
    const LayoutInfo &info = model.info;
    const std::string manifest_path = join_path(dir, kManifestFile);

    const std::vector<unsigned char> bytes = serialize(target); // collective; rank 0's are the file
    run_agreed(world, [&] {
        if (world.rank() != 0) return;
        make_directories(dir);
        write_file_atomically(manifest_path, [&](ByteSink &sink) { sink.write(bytes.data(), bytes.size()); });
        // The parameters again, for other tools: read them back from the bytes just written.
        MemorySource source(bytes.data(), bytes.size());
        const Container c = read_container(source);
        std::size_t total = 0;
        for (const auto &t : info.tensors) total += t.count;
        std::vector<unsigned char> packed(total * elem);
        SegmentIndex index(info);
        index.add(std::make_shared<MemorySource>(bytes.data(), bytes.size()), std::make_shared<Container>(c));
        std::size_t at = 0;
        for (int t = 0; t < int(info.tensors.size()); ++t) {
            const std::size_t n = info.tensors[std::size_t(t)].count;
            index.read("param", t, 0, n, packed.data() + at * elem);
            at += n;
        }
        write_file_atomically(join_path(dir, kSafetensorsFile), [&](ByteSink &sink) {
            write_safetensors(sink, info, packed.data(),
                              {{"producer", "shardopt"}, {"step_count", std::to_string(step_count)}});
        });
        // Shard files of an earlier sharded save are no longer referenced.
        for (const auto &name : list_directory(dir))
            if (is_shard_file_name(name) || name.find(".tmp.") != std::string::npos)
                remove_file_quietly(join_path(dir, name));
        fsync_directory(dir);
    });
}

std::unique_ptr<ShardedSave> begin_sharded_save(CheckpointTarget &target, const std::string &dir, bool copy) {
    Communicator &world = target.world();
    const ParameterSet &layout = target.layout();
    run_agreed(world, [&] {
        require(!dir.empty(), ErrorCode::invalid_argument, "save: empty checkpoint directory");
        check_checkpointable(target, "save");
    });
    auto save = std::make_unique<ShardedSave>();
    save->dir = dir;
    save->step_count = target.step_count();
    save->manifest = manifest_of(target, world.size());
    // Pipeline stages: the manifest and every shard file describe the whole model.
    ModelLayout model;
    run_agreed(world, [&] { model = model_layout(world, target.placement(), layout); });
    save->manifest.layout = model.info;
    const std::size_t elem = layout.element_size();

    std::int64_t gen_bits = 0;
    if (world.rank() == 0) {
        const std::string g = new_generation();
        gen_bits = std::int64_t(std::stoull(g, nullptr, 16));
    }
    world.broadcast(&gen_bits, 1, DType::i64, 0);
    const std::string generation = hex64(std::uint64_t(gen_bits));
    save->manifest.kind = "sharded-manifest";
    save->manifest.generation = generation;
    run_agreed(world, [&] {
        if (world.rank() == 0) make_directories(dir);
    });

    // Every rank writes its chunk of every bucket (LocalSGD: its whole replica, since the
    // replicas differ), params and each state slot.
    // HSDP: the shard groups are replicas of one another; only the first one's ranks write data.
    const Placement &placement = target.placement();
    std::vector<OwnedSegment> segs = placement.by_chunk ? target.chunk_segments() : whole_tensors(layout);
    if (placement.replica_copy) segs.clear();
    std::size_t copied = 0;
    if (copy) { // the target's memory changes with the next step: one buffer for all of it
        for (const auto &s : segs) copied += s.count * elem;
        save->copies.emplace_back(copied * std::size_t(target.state_slots() + 1));
        copied = 0;
    }
    for (int k = -1; k < target.state_slots(); ++k) {
        const bool sharded = k < 0 ? placement.params_sharded : placement.state_sharded;
        const unsigned char *base = target.host_part(k);
        for (const auto &s : segs) {
            const std::size_t at = sharded && placement.by_chunk ? s.local : s.flat;
            const unsigned char *bytes = base + at * elem;
            if (copy) {
                unsigned char *to = save->copies.front().data() + copied;
                std::memcpy(to, bytes, s.count * elem);
                bytes = to;
                copied += s.count * elem;
            }
            save->data.push_back({part_name(k), model.base + s.tensor, s.flat - layout.tensor(s.tensor).offset,
                                  s.count, bytes, s.count * elem});
        }
    }
    save->copies.push_back(target.rank_state()); // moving the first buffer keeps its data in place
    const std::vector<unsigned char> &own_state = save->copies.back();
    if (!own_state.empty())
        save->data.push_back(
            {rank_state_part(world.rank()), 0, 0, own_state.size(), own_state.data(), own_state.size()});
    save->shard_header = {{"format", kFormatName},
                          {"kind", "shard"},
                          {"rank", world.rank()},
                          {"world_size", world.size()},
                          {"generation", generation},
                          {"layout", layout_to_json(save->manifest.layout)}};
    save->file = shard_file_name(world.rank(), world.size(), generation);
    return save;
}

namespace {
// Runs fn, keeping what it throws in `outcome` instead (the writes run on threads of their own).
template <typename F> void capture(ShardedSave::Outcome &outcome, F &&fn) noexcept {
    try {
        fn();
    } catch (const Error &e) {
        outcome = {e.code(), e.what()};
    } catch (const std::bad_alloc &) {
        outcome = {ErrorCode::out_of_memory, "out of memory while writing a checkpoint"};
    } catch (const std::exception &e) {
        outcome = {ErrorCode::internal, e.what()};
    }
}
} // namespace

void write_shard(ShardedSave &save) noexcept {
    capture(save.shard_outcome, [&] {
        write_file_atomically(join_path(save.dir, save.file), [&](ByteSink &sink) {
            CountingSink counting(sink);
            save.header_xxh3 = write_container(counting, save.shard_header, save.data);
            save.bytes = counting.bytes;
        });
    });
}

void agree_sharded_save(Communicator &world, ShardedSave &save) {
    try {
        run_agreed(world, [&] {
            if (save.shard_outcome.code != ErrorCode::ok)
                throw Error(save.shard_outcome.code, save.shard_outcome.message);
        });
    } catch (...) {
        remove_file_quietly(join_path(save.dir, save.file)); // no manifest will point at it
        throw;
    }
    // What rank 0 needs for the manifest.
    const std::int64_t mine[2] = {std::int64_t(save.bytes), std::int64_t(save.header_xxh3)};
    std::vector<std::int64_t> all(2 * std::size_t(world.size()));
    world.allgather(mine, all.data(), 2, DType::i64);
    Manifest &manifest = save.manifest;
    manifest.files.clear();
    for (int r = 0; r < world.size(); ++r)
        manifest.files.push_back({shard_file_name(r, world.size(), manifest.generation), r,
                                  std::uint64_t(all[2 * r]), std::uint64_t(all[2 * r + 1])});
}

void write_manifest(ShardedSave &save) noexcept {
    capture(save.manifest_outcome, [&] {
        write_file_atomically(join_path(save.dir, kManifestFile),
                              [&](ByteSink &sink) { write_container(sink, manifest_to_json(save.manifest), {}); });
        // The new checkpoint is in place: older shard files, stale temporaries of interrupted
        // saves and a safetensors export of an older consolidated save go.
        const std::string &generation = save.manifest.generation;
        for (const auto &name : list_directory(save.dir)) {
            const bool current = name.find("." + generation + ".") != std::string::npos && is_shard_file_name(name);
            if ((is_shard_file_name(name) && !current) || name.find(".tmp.") != std::string::npos ||
                name == kSafetensorsFile)
                remove_file_quietly(join_path(save.dir, name));
        }
        fsync_directory(save.dir);
    });
}

void agree_manifest(Communicator &world, ShardedSave &save) {
    run_agreed(world, [&] {
        if (save.manifest_outcome.code != ErrorCode::ok)
            throw Error(save.manifest_outcome.code, save.manifest_outcome.message);
    });
}

void publish_sharded_save(Communicator &world, ShardedSave &save) {
    agree_sharded_save(world, save);
    if (world.rank() == 0) write_manifest(save);
    agree_manifest(world, save);
}

std::vector<unsigned char> serialize(CheckpointTarget &target) {
    Communicator &world = target.world();
    const ParameterSet &layout = target.layout();
    ModelLayout model;
    run_agreed(world, [&] { check_checkpointable(target, "serialize"); });
    run_agreed(world, [&] { model = model_layout(world, target.placement(), layout); }); // collective
    const std::size_t elem = layout.element_size(), n = layout.element_count();
    std::vector<unsigned char> params(n * elem);
    target.gather_packed(-1, params.data()); // collective (FSDP, hybrid)
    std::vector<std::vector<unsigned char>> state(std::size_t(target.state_slots()), std::vector<unsigned char>(n * elem));
    for (std::size_t k = 0; k < state.size(); ++k) target.gather_packed(int(k), state[k].data());
    if (model.root.size() > 1) { // pipeline stages: every stage's parts, stage after stage
        auto whole = [&](std::vector<unsigned char> &mine) {
            std::vector<unsigned char> all;
            for (std::size_t s = 0; s < model.root.size(); ++s) {
                std::size_t count = 0;
                for (int t = 0; t < model.tensor_count[s]; ++t)
                    count += model.info.tensors[std::size_t(model.first_tensor[s] + t)].count;
                std::vector<unsigned char> part = world.rank() == model.root[s] ? mine : std::vector<unsigned char>(count * elem);
                world.broadcast(part.data(), part.size(), DType::u8, model.root[s]);
                all.insert(all.end(), part.begin(), part.end());
            }
            mine = std::move(all);
        };
        whole(params);
        for (auto &slot : state) whole(slot);
    }

    // Every rank's rank state, gathered to all (padded to the largest).
    const std::vector<unsigned char> own_state = target.rank_state();
    std::vector<std::int64_t> state_sizes(std::size_t(world.size()));
    const std::int64_t own_size = std::int64_t(own_state.size());
    world.allgather(&own_size, state_sizes.data(), 1, DType::i64);
    const std::size_t widest = std::size_t(*std::max_element(state_sizes.begin(), state_sizes.end()));
    std::vector<unsigned char> rank_states;
    if (widest > 0) {
        std::vector<unsigned char> padded(widest, 0);
        std::copy(own_state.begin(), own_state.end(), padded.begin());
        rank_states.resize(widest * std::size_t(world.size()));
        world.allgather(padded.data(), rank_states.data(), widest, DType::u8);
    }
    std::vector<unsigned char> bytes;
    if (world.rank() == 0) {
        Manifest manifest = manifest_of(target, world.size());
        manifest.layout = model.info;
        manifest.kind = "consolidated";
        manifest.generation = new_generation();
        std::vector<SegmentData> data;
        for (int k = -1; k < int(state.size()); ++k) {
            const unsigned char *base = k < 0 ? params.data() : state[std::size_t(k)].data();
            std::size_t at = 0;
            for (int t = 0; t < int(model.info.tensors.size()); ++t) {
                const std::size_t count = model.info.tensors[std::size_t(t)].count;
                data.push_back({part_name(k), t, 0, count, base + at * elem, count * elem});
                at += count;
            }
        }
        for (int r = 0; r < world.size(); ++r)
            if (state_sizes[std::size_t(r)] > 0)
                data.push_back({rank_state_part(r), 0, 0, std::uint64_t(state_sizes[std::size_t(r)]),
                                rank_states.data() + std::size_t(r) * widest, std::size_t(state_sizes[std::size_t(r)])});
        VectorSink sink(bytes);
        write_container(sink, manifest_to_json(manifest), data);
    }
    std::int64_t size = std::int64_t(bytes.size());
    world.broadcast(&size, 1, DType::i64, 0);
    bytes.resize(std::size_t(size));
    world.broadcast(bytes.data(), bytes.size(), DType::u8, 0);
    return bytes;
}

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
            index.add(msource, mcontainer);
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

} // namespace checkpoint

} // namespace shardopt

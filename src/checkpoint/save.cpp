// save(): the consolidated form (consolidated.hpp: the one file and the parameters again as
// safetensors, each rank writing its own ranges), or the sharded form in the parts an asynchronous save runs apart (every rank its
// shard file, then rank 0 the manifest that makes the checkpoint exist).
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "atomic_file.hpp"
#include "checkpoint_target.hpp"
#include "collective_errors.hpp"
#include "consolidated.hpp"
#include "container_format.hpp"
#include "stage_layouts.hpp"
#include "target_manifest.hpp"
#include "shardopt/error.hpp"

namespace shardopt::checkpoint {
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

} // namespace

void save(CheckpointTarget &target, const std::string &dir, CheckpointForm form) {
    Communicator &world = target.world();
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
    // Every rank writes its own ranges of the one file, unless SHARDOPT_CHECKPOINT_WRITER=rank0
    // (ranks that do not share the directory's file system): then rank 0 writes what the others
    // stream to it.
    const char *env = std::getenv("SHARDOPT_CHECKPOINT_WRITER");
    const std::string writer = env ? env : "";
    const bool rank0 = writer == "rank0";
    run_agreed(world, [&] {
        require(writer.empty() || rank0 || writer == "every_rank", ErrorCode::invalid_argument,
                "SHARDOPT_CHECKPOINT_WRITER='" + writer + "': expected every_rank or rank0");
    });
    save_consolidated(target, dir, !rank0);
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
    // Segments of at most a window, so that the file is written (and later read) a window at a time.
    const std::size_t per_piece = std::max<std::size_t>(1, checkpoint_window_bytes() / elem);
    std::size_t total = 0;
    for (const auto &s : segs) total += s.count;
    if (copy) // the target's memory changes with the next step: one buffer for all of it
        save->copies.emplace_back(total * elem * std::size_t(target.state_slots() + 1));
    else
        save->source = &target; // read a window at a time while the file is written
    std::size_t copied = 0;
    for (int k = -1; k < target.state_slots(); ++k) {
        const bool sharded = k < 0 ? placement.params_sharded : placement.state_sharded;
        for (const auto &s : segs) {
            const std::size_t at = sharded && placement.by_chunk ? s.local : s.flat;
            for (std::size_t done = 0; done < s.count; done += per_piece) {
                const std::size_t count = std::min(per_piece, s.count - done);
                const unsigned char *bytes = nullptr;
                if (copy) {
                    unsigned char *to = save->copies.front().data() + copied;
                    target.copy_part(k, at + done, count, to);
                    bytes = to;
                    copied += count * elem;
                }
                save->data.push_back({part_name(k), model.base + s.tensor, s.flat - layout.tensor(s.tensor).offset + done,
                                      count, bytes, count * elem});
                save->where.push_back({k, at + done});
            }
        }
    }
    save->copies.push_back(target.rank_state()); // moving the first buffer keeps its data in place
    const std::vector<unsigned char> &own_state = save->copies.back();
    if (!own_state.empty()) {
        save->data.push_back(
            {rank_state_part(world.rank()), 0, 0, own_state.size(), own_state.data(), own_state.size()});
        save->where.push_back({-2, 0});
    }
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


// The shard file with its segments read from the target a window at a time: placed after a header
// whose checksums are filled in once the data is written.
void write_shard_from_target(ShardedSave &save) {
    std::vector<SegmentRecord> records;
    std::uint64_t data_bytes = 0;
    for (const auto &d : save.data) {
        records.push_back({d.part, d.tensor, d.offset, d.count, data_bytes, std::uint64_t(d.bytes), 0, {}});
        data_bytes += d.bytes;
    }
    std::string head = container_head(save.shard_header, records, data_bytes);
    const std::uint64_t head_bytes = head.size();
    PositionalFile file(join_path(save.dir, save.file), save.manifest.generation, PositionalFile::Mode::create,
                        head_bytes + data_bytes);
    std::vector<unsigned char> buffer;
    for (std::size_t i = 0; i < save.data.size(); ++i) {
        const SegmentData &d = save.data[i];
        const unsigned char *bytes = static_cast<const unsigned char *>(d.data);
        if (save.where[i].slot >= -1) {
            buffer.resize(d.bytes);
            save.source->copy_part(save.where[i].slot, save.where[i].at, std::size_t(d.count), buffer.data());
            bytes = buffer.data();
        }
        records[i].xxh3 = xxh3(bytes, d.bytes);
        file.write_at(head_bytes + records[i].data_offset, bytes, d.bytes);
    }
    head = container_head(save.shard_header, records, data_bytes);
    require(head.size() == head_bytes, ErrorCode::internal, "shard file: header length changed");
    file.write_at(0, head.data(), head.size());
    test_delay_point();
    file.sync();
    file.publish();
    save.bytes = head_bytes + data_bytes;
    save.header_xxh3 = get_u64(reinterpret_cast<const unsigned char *>(head.data()) + 24);
}
} // namespace

void write_shard(ShardedSave &save) noexcept {
    if (save.source) return capture(save.shard_outcome, [&] { write_shard_from_target(save); });
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
                name == kSafetensorsFile || is_params_file_name(name))
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

} // namespace shardopt::checkpoint

#include "consolidated.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <unistd.h>

#include "atomic_file.hpp"
#include "collective_errors.hpp"
#include "container_format.hpp"
#include "resharding.hpp"
#include "safetensors_writer.hpp"
#include "stage_layouts.hpp"
#include "target_manifest.hpp"
#include "shardopt/error.hpp"

namespace shardopt::checkpoint {

std::size_t checkpoint_window_bytes() {
    constexpr std::size_t kDefault = std::size_t(32) << 20, kLeast = std::size_t(4) << 10;
    const char *v = std::getenv("SHARDOPT_CHECKPOINT_WINDOW_BYTES");
    if (!v || !*v) return kDefault;
    char *end = nullptr;
    const unsigned long long n = std::strtoull(v, &end, 10);
    require(end && *end == '\0' && n > 0, ErrorCode::invalid_argument,
            std::string("SHARDOPT_CHECKPOINT_WINDOW_BYTES='") + v + "' is not a positive number of bytes");
    return std::max<std::size_t>(std::size_t(n), kLeast);
}

const unsigned char *ConsolidatedPlan::fetch(CheckpointTarget &target, const Piece &piece,
                                             std::vector<unsigned char> &buffer) const {
    if (piece.slot == -2) return rank_state.data();
    buffer.resize(std::size_t(piece.bytes));
    target.copy_part(piece.slot, piece.at, std::size_t(piece.count), buffer.data());
    return buffer.data();
}

std::string ConsolidatedPlan::head() const {
    std::vector<SegmentRecord> records;
    records.reserve(pieces.size());
    for (const auto &p : pieces)
        records.push_back({p.part, p.tensor, p.offset, p.count, p.data_offset, p.bytes, p.xxh3, p.file});
    return container_head(manifest_to_json(manifest), records, data_bytes);
}

namespace {

// One rank's segment of one tensor: the same for the parameters and every state slot.
struct Held {
    std::int64_t tensor, offset, count;
};

// The model-wide tensor index and element range of every segment this rank writes, with where
// its elements start in the rank's storage of each part (in elements).
struct OwnSegments {
    std::vector<Held> held;
    std::vector<std::size_t> at_sharded, at_full; // position in a shard buffer / a full buffer
};

OwnSegments own_segments(CheckpointTarget &target, const ModelLayout &model) {
    const ParameterSet &layout = target.layout();
    const Placement &placement = target.placement();
    // As the sharded save: every rank its chunk of every bucket; HSDP's replica groups nothing;
    // LocalSGD (replicas differ): the first rank of each stage its whole replica, as a gather
    // to rank 0 took it before.
    std::vector<OwnedSegment> segs;
    if (placement.by_chunk) segs = target.chunk_segments();
    else if (target.world().rank() == model.root.at(std::size_t(placement.pp_rank))) segs = whole_tensors(layout);
    if (placement.replica_copy) segs.clear();
    OwnSegments own;
    for (const auto &s : segs) {
        own.held.push_back({std::int64_t(model.base + s.tensor), std::int64_t(s.flat - layout.tensor(s.tensor).offset),
                            std::int64_t(s.count)});
        own.at_sharded.push_back(placement.by_chunk ? s.local : s.flat);
        own.at_full.push_back(s.flat);
    }
    return own;
}

} // namespace

ConsolidatedPlan plan_consolidated(CheckpointTarget &target, const char *what, bool params_file) {
    Communicator &world = target.world();
    const ParameterSet &layout = target.layout();
    run_agreed(world, [&] { check_checkpointable(target, what); });
    ModelLayout model;
    run_agreed(world, [&] { model = model_layout(world, target.placement(), layout); }); // collective
    const std::size_t window = checkpoint_window_bytes(); // the same everywhere: one environment per job
    const std::size_t elem = layout.element_size();
    const int slots = target.state_slots();

    ConsolidatedPlan plan;
    OwnSegments own;
    run_agreed(world, [&] {
        own = own_segments(target, model);
        plan.rank_state = target.rank_state();
    });

    // Every rank's segments, everywhere.
    const int n = world.size();
    const std::int64_t mine[2] = {std::int64_t(own.held.size()), std::int64_t(plan.rank_state.size())};
    std::vector<std::int64_t> counts(2 * std::size_t(n));
    world.allgather(mine, counts.data(), 2, DType::i64);
    std::int64_t widest = 0;
    for (int r = 0; r < n; ++r) widest = std::max(widest, counts[2 * std::size_t(r)]);
    std::vector<Held> all(std::size_t(widest) * std::size_t(n));
    if (widest > 0) {
        std::vector<Held> padded(own.held);
        padded.resize(std::size_t(widest), Held{-1, -1, -1});
        static_assert(sizeof(Held) == 3 * sizeof(std::int64_t));
        world.allgather(padded.data(), all.data(), 3 * std::size_t(widest), DType::i64);
    }

    const Placement &placement = target.placement();

    run_agreed(world, [&] {
        // The pieces of each part: the segments sorted by (tensor, offset), which must tile every
        // tensor, cut to at most a window.
        struct Entry {
            Held h;
            int owner;
            std::size_t index; // in the owner's list
        };
        std::vector<Entry> entries;
        for (int r = 0; r < n; ++r)
            for (std::int64_t i = 0; i < counts[2 * std::size_t(r)]; ++i)
                entries.push_back({all[std::size_t(r) * std::size_t(widest) + std::size_t(i)], r, std::size_t(i)});
        std::sort(entries.begin(), entries.end(), [](const Entry &a, const Entry &b) {
            return a.h.tensor != b.h.tensor ? a.h.tensor < b.h.tensor : a.h.offset < b.h.offset;
        });
        std::vector<std::uint64_t> covered(model.info.tensors.size(), 0);
        for (const auto &e : entries) {
            require(e.h.tensor >= 0 && std::size_t(e.h.tensor) < covered.size() && e.h.count > 0 &&
                        std::uint64_t(e.h.offset) == covered[std::size_t(e.h.tensor)],
                    ErrorCode::internal,
                    "consolidated checkpoint: the ranks' segments do not tile tensor " + std::to_string(e.h.tensor));
            covered[std::size_t(e.h.tensor)] += std::uint64_t(e.h.count);
        }
        for (std::size_t t = 0; t < covered.size(); ++t)
            require(covered[t] == model.info.tensors[t].count, ErrorCode::internal,
                    "consolidated checkpoint: no rank holds all of tensor '" + model.info.tensors[t].name + "'");
        const std::uint64_t per_piece = std::max<std::uint64_t>(1, window / elem);
        std::uint64_t data_offset = 0;
        for (int k = -1; k < slots; ++k) {
            const bool sharded = k < 0 ? placement.params_sharded : placement.state_sharded;
            for (const auto &e : entries)
                for (std::uint64_t done = 0; done < std::uint64_t(e.h.count); done += per_piece) {
                    ConsolidatedPlan::Piece p;
                    p.part = part_name(k);
                    p.slot = k;
                    p.tensor = int(e.h.tensor);
                    p.offset = std::uint64_t(e.h.offset) + done;
                    p.count = std::min(per_piece, std::uint64_t(e.h.count) - done);
                    p.owner = e.owner;
                    p.data_offset = data_offset;
                    p.bytes = p.count * elem;
                    if (e.owner == world.rank())
                        p.at = (sharded ? own.at_sharded[e.index] : own.at_full[e.index]) + std::size_t(done);
                    data_offset += p.bytes;
                    plan.pieces.push_back(std::move(p));
                }
            if (k < 0) plan.param_bytes = data_offset;
        }
        for (int r = 0; r < n; ++r) {
            const std::uint64_t bytes = std::uint64_t(counts[2 * std::size_t(r) + 1]);
            if (bytes == 0) continue;
            ConsolidatedPlan::Piece p;
            p.part = rank_state_part(r);
            p.slot = -2;
            p.count = p.bytes = bytes;
            p.owner = r;
            p.data_offset = data_offset;
            data_offset += bytes;
            plan.pieces.push_back(std::move(p));
        }
        plan.data_bytes = data_offset;
    });

    std::int64_t generation = 0;
    if (world.rank() == 0) generation = std::int64_t(std::stoull(new_generation(), nullptr, 16));
    world.broadcast(&generation, 1, DType::i64, 0);
    plan.manifest = manifest_of(target, world.size());
    plan.manifest.layout = model.info;
    plan.manifest.kind = "consolidated";
    plan.manifest.generation = hex64(std::uint64_t(generation));
    if (params_file) { // the parameters move to their own file's data area
        plan.params_file = params_file_name(plan.manifest.generation);
        plan.params_head = safetensors_head(plan.manifest.layout, {{"producer", "shardopt"},
                                                                   {"step_count", std::to_string(plan.manifest.step_count)},
                                                                   {"generation", plan.manifest.generation}});
        for (auto &p : plan.pieces) {
            if (p.slot == -1) {
                p.file = plan.params_file;
                p.data_offset += plan.params_head.size();
            } else {
                p.data_offset -= plan.param_bytes;
            }
        }
        plan.data_bytes -= plan.param_bytes;
    }
    // Every rank's manifest fields are the same; its length is rank 0's, for certain.
    std::int64_t head_bytes = std::int64_t(plan.head().size());
    world.broadcast(&head_bytes, 1, DType::i64, 0);
    plan.head_bytes = std::uint64_t(head_bytes);
    return plan;
}

void hash_pieces(CheckpointTarget &target, ConsolidatedPlan &plan) {
    Communicator &world = target.world();
    std::vector<std::int64_t> sums(plan.pieces.size(), 0);
    std::vector<unsigned char> buffer;
    run_agreed(world, [&] {
        for (std::size_t i = 0; i < plan.pieces.size(); ++i)
            if (plan.pieces[i].owner == world.rank())
                sums[i] = std::int64_t(xxh3(plan.fetch(target, plan.pieces[i], buffer), std::size_t(plan.pieces[i].bytes)));
    });
    // One rank adds a nonzero value to each: the sum is the owner's (wrapping is well defined in
    // the reduction's two's complement).
    if (!sums.empty()) world.allreduce(sums.data(), sums.data(), sums.size(), DType::i64, ReduceOp::sum);
    for (std::size_t i = 0; i < plan.pieces.size(); ++i) plan.pieces[i].xxh3 = std::uint64_t(sums[i]);
}

void stream_consolidated(CheckpointTarget &target, const ConsolidatedPlan &plan, ByteSink *sink) {
    Communicator &world = target.world();
    const int me = world.rank(), n = world.size();
    const std::int32_t wants_mine = sink != nullptr;
    std::vector<std::int32_t> wants(static_cast<std::size_t>(n));
    world.allgather(&wants_mine, wants.data(), 1, DType::i32);
    int wanting = 0, only = -1;
    for (int r = 0; r < n; ++r)
        if (wants[std::size_t(r)]) {
            ++wanting;
            only = r;
        }
    ErrorCode code = ErrorCode::ok, read_code = ErrorCode::ok;
    std::string message, read_message;
    auto put = [&](const void *data, std::size_t bytes) {
        if (!sink || code != ErrorCode::ok) return;
        try {
            sink->write(data, bytes);
        } catch (const Error &e) {
            code = e.code();
            message = e.what();
        } catch (const std::exception &e) {
            code = ErrorCode::io;
            message = std::string("writing the serialized checkpoint: ") + e.what();
        }
    };
    if (wanting > 0) {
        // The head: rank 0's, broadcast when another rank wants it.
        std::string head;
        if (me == 0) head = plan.head();
        head.resize(std::size_t(plan.head_bytes));
        if (wanting > 1 || only != 0) world.broadcast(head.data(), head.size(), DType::u8, 0);
        put(head.data(), head.size());

        // The data in runs: consecutive pieces of one owner, at most a window (or one piece).
        const std::size_t window = checkpoint_window_bytes();
        std::vector<unsigned char> buffer;
        constexpr int kDataTag = 0x5C0, kAckTag = 0x5C1;
        for (std::size_t i = 0; i < plan.pieces.size();) {
            const int owner = plan.pieces[i].owner;
            std::size_t end = i + 1, bytes = std::size_t(plan.pieces[i].bytes);
            while (end < plan.pieces.size() && plan.pieces[end].owner == owner &&
                   bytes + plan.pieces[end].bytes <= window)
                bytes += std::size_t(plan.pieces[end++].bytes);
            const bool others = wanting - int(wants[std::size_t(owner)] != 0) > 0;
            if (me == owner) { // the run into the buffer (a failure to read it is the stream's error, later)
                buffer.resize(bytes);
                std::size_t at = 0;
                for (std::size_t j = i; j < end; ++j) {
                    const auto &p = plan.pieces[j];
                    if (read_code == ErrorCode::ok) {
                        try {
                            if (p.slot == -2) std::memcpy(buffer.data() + at, plan.rank_state.data(), std::size_t(p.bytes));
                            else target.copy_part(p.slot, p.at, std::size_t(p.count), buffer.data() + at);
                        } catch (const Error &e) {
                            read_code = e.code();
                            read_message = e.what();
                        }
                    }
                    at += std::size_t(p.bytes);
                }
                if (!others) put(buffer.data(), bytes);
            }
            if (others) {
                if (wanting == 1) { // one reader (rank 0 writing the file): to it alone, one run in flight
                    if (me == owner) {
                        world.send(buffer.data(), bytes, DType::u8, only, kDataTag);
                        unsigned char ack = 0;
                        world.recv(&ack, 1, DType::u8, only, kAckTag);
                    } else if (me == only) {
                        buffer.resize(bytes);
                        world.recv(buffer.data(), bytes, DType::u8, owner, kDataTag);
                        const unsigned char ack = 1;
                        world.send(&ack, 1, DType::u8, owner, kAckTag);
                        put(buffer.data(), bytes);
                    }
                } else {
                    buffer.resize(bytes);
                    world.broadcast(buffer.data(), bytes, DType::u8, owner);
                    put(buffer.data(), bytes);
                }
            }
            i = end;
        }
    }
    run_agreed(world, [&] {
        if (read_code != ErrorCode::ok) throw Error(read_code, read_message);
        if (code != ErrorCode::ok) throw Error(code, message);
    });
}

namespace {

// The stream of a saved checkpoint into its two files: the head into the checkpoint's, the
// parameters (first in the stream) into their own file's data area, the rest after the head.
class FileSink final : public ByteSink {
  public:
    FileSink(PositionalFile &file, PositionalFile &params, const ConsolidatedPlan &plan)
        : file_(file), params_(params), head_(plan.head_bytes), params_end_(plan.head_bytes + plan.param_bytes),
          params_head_(plan.params_head.size()) {}
    void write(const void *data, std::size_t n) override {
        const auto *p = static_cast<const unsigned char *>(data);
        while (n > 0) {
            std::uint64_t take;
            if (at_ < head_) {
                take = std::min<std::uint64_t>(n, head_ - at_);
                file_.write_at(at_, p, std::size_t(take));
            } else if (at_ < params_end_) {
                take = std::min<std::uint64_t>(n, params_end_ - at_);
                params_.write_at(params_head_ + (at_ - head_), p, std::size_t(take));
            } else {
                take = n;
                file_.write_at(at_ - (params_end_ - head_), p, std::size_t(take));
            }
            at_ += take;
            p += take;
            n -= std::size_t(take);
        }
    }

  private:
    PositionalFile &file_, &params_;
    std::uint64_t head_, params_end_, params_head_, at_ = 0;
};

} // namespace

void link_safetensors(const std::string &dir, const std::string &params_file, const std::string &tag) {
    const std::string from = join_path(dir, params_file), to = join_path(dir, kSafetensorsFile);
    const std::string tmp = to + ".tmp." + tag;
    remove_file_quietly(tmp);
    if (::link(from.c_str(), tmp.c_str()) != 0) {
        FileSource source(from);
        PositionalFile copy(to, tag, PositionalFile::Mode::create, source.size());
        std::vector<unsigned char> buffer(std::min<std::uint64_t>(source.size(), checkpoint_window_bytes()));
        for (std::uint64_t at = 0; at < source.size(); at += buffer.size()) {
            const std::size_t n = std::size_t(std::min<std::uint64_t>(buffer.size(), source.size() - at));
            source.read(at, buffer.data(), n);
            copy.write_at(at, buffer.data(), n);
        }
        copy.sync();
        copy.publish();
        return;
    }
    if (::rename(tmp.c_str(), to.c_str()) != 0) {
        const int e = errno;
        remove_file_quietly(tmp);
        throw Error(ErrorCode::io, "cannot rename into place '" + to + "': " + std::strerror(e));
    }
}

void save_consolidated(CheckpointTarget &target, const std::string &dir, bool every_rank) {
    Communicator &world = target.world();
    run_agreed(world, [&] { require(!dir.empty(), ErrorCode::invalid_argument, "save: empty checkpoint directory"); });
    ConsolidatedPlan plan = plan_consolidated(target, "save", true);
    const std::string path = join_path(dir, kManifestFile), params_path = join_path(dir, plan.params_file);
    const std::string &tag = plan.manifest.generation;
    std::unique_ptr<PositionalFile> file, params;
    // Rank 0 makes the two temporary files at their sizes, then the others open them.
    run_agreed(world, [&] {
        if (world.rank() != 0) return;
        make_directories(dir);
        file = std::make_unique<PositionalFile>(path, tag, PositionalFile::Mode::create, plan.file_bytes());
        params = std::make_unique<PositionalFile>(params_path, tag, PositionalFile::Mode::create,
                                                  plan.params_head.size() + plan.param_bytes);
        params->write_at(0, plan.params_head.data(), plan.params_head.size());
    });
    if (every_rank) {
        run_agreed(world, [&] {
            if (world.rank() != 0) {
                file = std::make_unique<PositionalFile>(path, tag, PositionalFile::Mode::open);
                params = std::make_unique<PositionalFile>(params_path, tag, PositionalFile::Mode::open);
            }
        });
        // Each rank its own ranges, hashed on the way; then its writes flushed.
        std::vector<std::int64_t> sums(plan.pieces.size(), 0);
        run_agreed(world, [&] {
            std::vector<unsigned char> buffer;
            for (std::size_t i = 0; i < plan.pieces.size(); ++i) {
                const auto &p = plan.pieces[i];
                if (p.owner != world.rank()) continue;
                const unsigned char *data = plan.fetch(target, p, buffer);
                sums[i] = std::int64_t(xxh3(data, std::size_t(p.bytes)));
                if (p.file.empty()) file->write_at(plan.head_bytes + p.data_offset, data, std::size_t(p.bytes));
                else params->write_at(p.data_offset, data, std::size_t(p.bytes));
            }
            file->sync();
            params->sync();
            test_delay_point();
            if (world.rank() != 0) {
                file->close();
                params->close();
            }
        });
        if (!sums.empty()) world.allreduce(sums.data(), sums.data(), sums.size(), DType::i64, ReduceOp::sum);
        for (std::size_t i = 0; i < plan.pieces.size(); ++i) plan.pieces[i].xxh3 = std::uint64_t(sums[i]);
        run_agreed(world, [&] {
            if (world.rank() != 0) return;
            const std::string head = plan.head();
            require(head.size() == plan.head_bytes, ErrorCode::internal, "consolidated checkpoint: header length changed");
            file->write_at(0, head.data(), head.size());
        });
    } else {
        hash_pieces(target, plan);
        std::unique_ptr<FileSink> sink;
        if (world.rank() == 0) sink = std::make_unique<FileSink>(*file, *params, plan);
        stream_consolidated(target, plan, sink.get());
        run_agreed(world, [&] { test_delay_point(); });
    }
    // Rank 0 publishes: the parameters' file, then the checkpoint (the moment it exists), then
    // model.safetensors for other tools.
    run_agreed(world, [&] {
        if (world.rank() != 0) return;
        params->sync();
        params->publish();
        file->sync();
        file->publish();
        link_safetensors(dir, plan.params_file, tag);
        // Shard files of an earlier sharded save, the parameters of earlier consolidated ones and
        // temporaries of interrupted saves are no longer referenced.
        for (const auto &name : list_directory(dir))
            if (is_shard_file_name(name) || name.find(".tmp.") != std::string::npos ||
                (is_params_file_name(name) && name != plan.params_file))
                remove_file_quietly(join_path(dir, name));
        fsync_directory(dir);
    });
}

} // namespace shardopt::checkpoint

// The checkpoint operations (save, serialize, load) over what they need of an optimizer: its
// layout, options and placement across the ranks, and its storage shown as host bytes (the step
// engine, src/sharding/engine/engine_state.cpp, copies device memory through host mirrors;
// asynchronous SGD, src/async/async_checkpoint.cpp, shows its view and owner). They write and
// read one file format (save.cpp, serialize.cpp, load.cpp), whatever the memory space, world
// size and strategy, so a checkpoint loads into any of them.
//
// Parts: part k < 0 is the parameters, k >= 0 optimizer state slot k. Each is laid out as the
// optimizer lays out its storage: the full padded flat buffer, or this rank's shard buffer
// when its placement shards it (params_sharded, state_sharded), elements of the layout's dtype at
// the positions the owned segments give (OwnedSegment::flat, or ::local in a shard buffer).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../params/owned_segments.hpp"
#include "container_format.hpp"
#include "manifest.hpp"
#include "shardopt/error.hpp"
#include "shardopt/sharded_optimizer.hpp"

namespace shardopt::checkpoint {

// Where a target's parts lie across the ranks: what its strategy's plan and process grid say, as
// far as checkpoints go (src/sharding/placement.hpp makes one of them).
struct Placement {
    bool params_sharded = false; // part -1 is this rank's shard buffer, else the full padded buffer
    bool state_sharded = false;  // parts k >= 0 likewise
    // The rank holds (and writes) its chunk of every bucket, chunk_segments(); or, when the
    // ranks' copies differ (LocalSGD's replicas), every tensor whole.
    bool by_chunk = true;
    // HSDP: this rank's shard group is a replica of the first one, whose ranks write the data.
    bool replica_copy = false;
    // The hybrid grid's sizes and this rank's pipeline stage (rank = (pp * dp_size + dp) * tp_size + tp).
    int pp_size = 1, tp_size = 1, dp_size = 1, pp_rank = 0;
};

class CheckpointTarget {
  public:
    virtual ~CheckpointTarget() = default;

    // Every rank, for the checkpoint's own collectives (error agreement, generation, file
    // sizes, serialized bytes, state gathers): it must take host buffers.
    virtual Communicator &world() = 0;
    virtual const ParameterSet &layout() const = 0;
    // Kind and current learning rate included.
    virtual const OptimizerOptions &optimizer_options() const = 0;
    virtual int state_slots() const = 0;
    virtual const ShardingOptions &sharding() const = 0;
    virtual std::int64_t step_count() const = 0;
    virtual const Placement &placement() const = 0;
    // Micro-steps of gradient accumulation done since the last update.
    virtual int micro_step() const = 0;
    // Chunk group_rank of every bucket (see owned_chunks).
    virtual const std::vector<OwnedSegment> &chunk_segments() const = 0;

    // Host bytes of part k as laid out above; valid until commit() or the target's end.
    virtual const unsigned char *host_part(int k) = 0;
    // Elements [first, first + count) of part k as laid out above, copied into dst: what the
    // saves read, a window at a time. By default from host_part(k); a target whose parts are not
    // host bytes already (state kept by the update rules, device memory) reads just the range,
    // so a save holds no copy of the whole part.
    virtual void copy_part(int k, std::size_t first, std::size_t count, void *dst);
    // Packed part k, every tensor in order (collective over the world, like get_parameters).
    virtual void gather_packed(int k, void *packed) = 0;
    // What this rank keeps for itself beyond parameters and optimizer state (gradient
    // compression's error-feedback residuals), as opaque bytes; empty when nothing. Saved per
    // rank, and given back to the same rank of a checkpoint loaded at the same world size.
    virtual std::vector<unsigned char> rank_state() = 0;
    // Replaces parameters, state (the parts laid out as host_part's), step count and learning
    // rate; gathered FSDP units are released. Runs only once every rank has staged everything.
    // rank_state: this rank's bytes from the checkpoint, or null when it holds none for it.
    virtual void commit(const std::vector<unsigned char> &params, const std::vector<std::vector<unsigned char>> &state,
                        std::int64_t step_count, double lr, const std::vector<unsigned char> *rank_state) = 0;

    // Elements of part k (full padded count, or the shard count).
    std::size_t part_elements(int k) const;
};

// ShardedOptimizer::save, serialize, load and deserialize, for any target (collective over the
// world; see sharded_optimizer.hpp for the contract).
void save(CheckpointTarget &target, const std::string &dir, CheckpointForm form);
std::vector<unsigned char> serialize(CheckpointTarget &target);
// The same bytes, in order, into `sink` on each rank that passes one (consolidated.hpp).
void serialize(CheckpointTarget &target, ByteSink *sink);
// From the directory or manifest `dir`, or from `bytes` when not null (serialize()'s bytes).
void load(CheckpointTarget &target, const std::string &dir, const void *bytes, std::size_t size);
void deserialize(CheckpointTarget &target, const void *data, std::size_t size);

// The sharded save in parts, so that the writing can overlap training (AsyncCheckpoint):
//   begin_sharded_save   collective, at a step boundary: the checks, the generation, this rank's
//                        segments (copied into the save when `copy`, else read from the target
//                        a window at a time by write_shard: it must stay unchanged until then).
//   write_shard          no communication, any thread: this rank's shard file, written
//                        atomically; an error is kept in the save, not thrown.
//   agree_sharded_save   collective: every rank learns whether any write failed (then every
//                        rank throws its error and removes its file), and the files' sizes.
//   write_manifest       rank 0, any thread: the manifest, atomically (the moment the checkpoint
//                        exists), then what it replaced goes; an error is kept, not thrown.
//   agree_manifest       collective: every rank throws rank 0's manifest error, if any.
// publish_sharded_save is the last three back to back; save(sharded) is all of them.
struct ShardedSave {
    struct Outcome {
        ErrorCode code = ErrorCode::ok;
        std::string message;
    };
    std::string dir;
    std::string file; // this rank's shard file name
    std::int64_t step_count = 0;
    Manifest manifest; // the files filled in by agree_sharded_save
    nlohmann::json shard_header;
    std::vector<SegmentData> data;
    std::vector<std::vector<unsigned char>> copies; // what data points into, when copied
    // Not copied (a synchronous save): the segments' bytes are read from `source` while the file
    // is written; where[i] says where segment i lies (state slot or -1, first element; -2: data
    // points at it, the rank state).
    CheckpointTarget *source = nullptr;
    struct Where {
        int slot;
        std::size_t at;
    };
    std::vector<Where> where;
    std::uint64_t bytes = 0, header_xxh3 = 0;        // this rank's file, once written
    Outcome shard_outcome, manifest_outcome;
};
std::unique_ptr<ShardedSave> begin_sharded_save(CheckpointTarget &target, const std::string &dir, bool copy);
void write_shard(ShardedSave &save) noexcept;
void agree_sharded_save(Communicator &world, ShardedSave &save);
void write_manifest(ShardedSave &save) noexcept;
void agree_manifest(Communicator &world, ShardedSave &save);
void publish_sharded_save(Communicator &world, ShardedSave &save);

} // namespace shardopt::checkpoint

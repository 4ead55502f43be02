// ParameterStore: the parameters at rest and every way they are read. The full padded buffer, or
// this rank's shard of it (FSDP); the caller's own buffer, the space's memory, or with
// cpu_offload_params a page-locked host shard. FSDP units (= buckets) are gathered into buffers of
// their own around their use, with the next one prefetched; ZeRO-1/2's allgathers after the
// update run until the parameters are next read.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "engine_context.hpp"
#include "gather_order.hpp"
#include "offload_lanes.hpp"

namespace shardopt::engine {

class ParameterStore {
  public:
    // `external`: the caller's buffer (padded_count elements in the space), or null for the
    // engine's own. `note_buffers`: called after a unit buffer is taken (the engine's peak).
    ParameterStore(const EngineContext &ctx, void *external, std::function<void()> note_buffers);
    ~ParameterStore();

    unsigned char *data() const noexcept { return params_->data(); }
    std::size_t bytes() const noexcept { return params_->bytes(); }
    // The parameters at rest are host memory (the host space, or cpu_offload_params).
    bool on_host() const noexcept { return ctx_.space.host_accessible() || ctx_.offload.params; }

    // --- ShardedOptimizer's parameter calls ---
    void *parameters();
    void *tensor_parameters(int t);
    // `start_unit(u)` starts gathering unit u into its buffer (taken already): the update path
    // knows where the unit's shard is (gather_unit here, or first a copy from the host).
    void *gather(int b, const std::function<void(int)> &start_unit);
    void release(int b);
    void release_all_units();
    // Packed copy of every parameter into host memory, or (in_space) into the space's memory,
    // enqueued on its compute stream.
    void get(void *packed, bool in_space = false);
    // The resident buffer (full or shard) composed on the host from packed parameters, padding 0.
    std::vector<unsigned char> compose(const void *packed_host) const;
    // Replaces the parameters at rest with `host` (bytes() bytes laid out as the resident buffer).
    void write(const unsigned char *host);
    // Full buffer in host-accessible memory holding the packed parameters at its start: lays them
    // out in place as the resident buffer (each bucket at its offset, padding 0).
    void unpack_in_place();

    // --- the update's side ---
    // Segment s of the resident buffer.
    unsigned char *param_at(const OwnedSegment &s) const;
    // The space's copy of bucket b's owned region (where ZeRO-Offload's updated parameters go).
    unsigned char *owned_params(int b) const;
    // FSDP: starts unit b's allgather into its buffer, from the shard at rest (or, with the shard
    // on the host, from the copy of it already in its place in the unit buffer).
    void gather_unit(int b);
    unsigned char *unit_buffer(int b) const { return units_[std::size_t(b)].buffer->data(); }
    // ZeRO-1/2: starts bucket b's allgather of the other ranks' updated chunks (until waited for).
    void start_bucket_gather(int b);
    void wait_gather(int b);
    void wait_gathers();

    std::size_t buffer_bytes() const; // gathered units and their spares
    // Waits, quietly, for every gather still in flight (teardown after an error).
    void abandon() noexcept;

  private:
    struct Unit { // FSDP: a gathered bucket
        SpaceBufferPtr buffer;
        WorkPtr work;
        bool gathered = false;
    };
    SpaceBufferPtr take_unit_buffer();

    const EngineContext &ctx_;
    std::function<void()> note_buffers_;
    SpaceBufferPtr params_; // full padded buffer, or the shard (FSDP)
    std::vector<Unit> units_;
    std::vector<SpaceBufferPtr> free_unit_buffers_;
    std::size_t gathered_units_ = 0; // units with gathered set (asked for or prefetched)
    GatherOrder gather_order_;
    std::vector<WorkPtr> gathers_; // ZeRO-1/2, per bucket: the allgather after the update
};

} // namespace shardopt::engine

// Update: the engine's optimizer update, and how the data it needs moves, as the memory plan
// chooses (the way Space is chosen by memory):
//   SpaceUpdate     (space_update.cpp)     the update runs where the memory is: the space's rules
//                                          over its own buffers (host memory, or the device);
//   OffloadedUpdate (offloaded_update.cpp) ZeRO-Offload: the update runs on the CPU over host
//                                          copies of the rank's owned regions, each reduced gradient
//                                          copied out as its reduction completes and the updated
//                                          parameters copied back, as OffloadSchedule says.
// Both update bucket by bucket (one SpanUpdater per bucket over its owned segments), so bucket
// b's allgather after the update overlaps the update of b+1. As a BucketListener the update path
// follows the buckets' reductions (the offloaded one copies each gradient out at once).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine_context.hpp"
#include "gradient_buckets.hpp"
#include "parameter_store.hpp"
#include "update_layout.hpp"

namespace shardopt::engine {

class Update : public BucketListener {
  public:
    ~Update() override;

    // The sum of squares of the reduced gradient over every rank (allreduced over the world; for
    // LocalSGD, which steps on each rank's own gradient, this rank's), summed in one fixed order.
    virtual double sum_of_squares() = 0;
    // Every bucket's gradient scaled by `clip` (1: not clipped) and updated; where the plan
    // gathers after the update, each bucket's allgather started once it is updated.
    virtual void apply(double clip) = 0;
    // FSDP: unit b's allgather started, its buffer taken (ParameterStore::gather's start_unit).
    virtual void gather_unit(int b) = 0;
    // Around a replacement of the parameters at rest (set_parameters, a load, synchronization).
    virtual void before_params_replaced() {}
    virtual void after_params_replaced() {}
    // Where the parameters (params_bytes) and the state (state_bytes()) are, into `m`.
    virtual void account(MemoryStats &m, std::size_t params_bytes) const = 0;
    // Waits, quietly, for copies still in flight (teardown).
    virtual void finish_copies() noexcept {}

    // --- the optimizer state, wherever it lives ---
    int state_slots() const noexcept { return state_slots_; }
    void set_lr(double lr);
    // The rules' bias corrections count from `steps` (a restored checkpoint).
    void set_step_count(std::int64_t steps);
    // State slot k as the checkpoints lay it out on the host (the full padded buffer, or the
    // shard buffer when state is sharded), read span by span from the updaters (unowned elements
    // and padding 0); and written back the same way.
    std::vector<unsigned char> state_to_host(int k) const;
    // Elements [first, first + count) of that layout into dst, read span by span (a span only
    // partly inside through a buffer of its size): what a checkpoint writes, without the whole.
    void read_state_range(int k, std::size_t first, std::size_t count, unsigned char *dst) const;
    // Collective over the group where low-bit blocks are split between ranks (their scales are the
    // maxima over every rank's part).
    void state_from_host(int k, const unsigned char *host);
    std::size_t state_bytes() const;

  protected:
    // One bucket's part of the update: its owned segments and the rule over them.
    struct BucketUpdate {
        std::vector<OwnedSegment> segments;
        std::unique_ptr<SpanUpdater> updater;
    };
    Update(const EngineContext &ctx, const std::vector<OwnedSegment> &owned, int state_slots);
    // The spans of bucket u's segments, their parameters where `params_at` says.
    template <typename ParamsAt> std::vector<Span> spans_of(const BucketUpdate &u, ParamsAt params_at) const {
        std::vector<Span> spans;
        for (const OwnedSegment &s : u.segments) spans.push_back(layout_.span(s, params_at(s)));
        return spans;
    }
    // Combines round p of `stats` (UpdateLayout) across the ranks that share tensors or blocks.
    void combine_stats(int p, std::vector<double> &stats) const;
    // Between begin_step and apply, for rules that transform whole matrices: each matrix
    // assembled from its holders' parts, transformed by its owner alone, and its result handed to
    // every holder (UpdateLayout::matrix_jobs). Collective over the group.
    void transform_matrices();

    const EngineContext &ctx_;
    UpdateLayout layout_;
    std::vector<BucketUpdate> buckets_; // per bucket; updaters made by the derived class
    int state_slots_;
};

// The update path of the engine's offload plan. `owned`: the segments this rank updates (its
// chunks where state is sharded, else every tensor whole). Collective over nothing.
std::unique_ptr<Update> make_update(const EngineContext &ctx, ParameterStore &params, GradientBuckets &grads,
                                    const std::vector<OwnedSegment> &owned, int state_slots);
std::unique_ptr<Update> make_space_update(const EngineContext &ctx, ParameterStore &params, GradientBuckets &grads,
                                          const std::vector<OwnedSegment> &owned, int state_slots);
std::unique_ptr<Update> make_offloaded_update(const EngineContext &ctx, ParameterStore &params, GradientBuckets &grads,
                                              const std::vector<OwnedSegment> &owned, int state_slots);

} // namespace shardopt::engine

// ShardOwner: rank k as the owner of shard k of the parameters (chunk k of every bucket, laid out
// as a ZeRO rank's shard buffer): the master copy, the base optimizer's state for it, and its one
// update per clock. The update is the mean of the gradients it is given, summed in the order
// given with the backends' reduction kernels, so that n gradients in rank order average exactly
// as DDP's allreduce(avg) does; then one step of the base optimizer over the owned segments.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "../params/aligned_buffer.hpp"
#include "../sharding/engine/space.hpp"
#include "../params/owned_segments.hpp"
#include "shardopt/optim.hpp"
#include "shardopt/params.hpp"

namespace shardopt::async {

class ShardOwner {
  public:
    // layout: planned for the world. The updaters run in `space` (host).
    ShardOwner(const ParameterSet &layout, int rank, const OptimizerOptions &optimizer, engine::Space &space);

    std::size_t shard_bytes() const noexcept { return master_.size(); }
    unsigned char *master() noexcept { return master_.data(); }
    const std::vector<OwnedSegment> &segments() const noexcept { return segments_; }
    int state_slots() const noexcept { return state_slots_; }

    // One update: add_gradient() for each gradient (shard_bytes() each, in summation order), then
    // apply() divides by their number and steps the base optimizer.
    void add_gradient(const unsigned char *shard);
    void apply();

    // Optimizer state slot k as a shard buffer (unowned padding 0), and back.
    std::vector<unsigned char> state_to_host(int slot) const;
    void state_from_host(int slot, const unsigned char *shard);
    void set_step_count(std::int64_t steps);
    void set_lr(double lr);
    std::size_t state_bytes() const noexcept;

  private:
    struct BucketUpdate {
        std::vector<OwnedSegment> segments;
        std::unique_ptr<engine::SpanUpdater> updater;
    };
    const ParameterSet &layout_;
    std::size_t elem_;
    AlignedBuffer master_, sum_;
    int summed_ = 0;
    std::vector<OwnedSegment> segments_;
    std::vector<BucketUpdate> updates_; // per bucket
    int state_slots_ = 0;
};

} // namespace shardopt::async

// Reduction: how the engine averages over the shard group what its strategy averages, a ready
// gradient bucket (allreduce, or reduce-scatter where gradients are sharded) and LocalSGD's
// parameters. CollectiveReduction runs the communicator's collectives; with gradient compression
// (ShardingOptions::compression) CompressedReduction runs its reducer in their place
// (../compression/compressed_reducer.hpp), which keeps state of its own: error-feedback residuals,
// and for LocalSGD the parameters of the last averaging (what it compresses is the change since).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine_context.hpp"

namespace shardopt::engine {

class Reduction {
  public:
    virtual ~Reduction() = default;

    // Starts averaging bucket b's gradient (`bucket`: its padded elements in the space, ordered
    // after the compute stream already): in place where the plan allreduces, else this rank's
    // chunk into `shard_out`. Every rank starts its buckets in the same order.
    virtual void start(int b, unsigned char *bucket, unsigned char *shard_out) = 0;
    // Whether bucket b's reduction has completed, without waiting (false when it cannot tell).
    virtual bool test(int b) = 0;
    // Waits for bucket b's reduction, if one is in flight, and completes it.
    virtual void finish(int b) = 0;
    // LocalSGD: `params` (the full padded buffer in the space) averaged over the group.
    virtual void average_params(unsigned char *params) = 0;
    // set_parameters gave every rank these parameters (`host`, laid out as the resident buffer).
    virtual void params_set(const unsigned char *host, std::size_t bytes) { (void)host, (void)bytes; }
    // A step was skipped for non-finite gradients.
    virtual void skipped_step() {}
    // This rank's own state for checkpoints (empty: none), and back (null: none was saved, or
    // bytes of other options: started afresh).
    virtual std::vector<unsigned char> rank_state() { return {}; }
    virtual void restore_rank_state(const std::vector<unsigned char> *bytes) { (void)bytes; }
    // Bytes held for it (MemoryStats::compression_bytes), and moved by it beyond the grid's
    // communicators.
    virtual std::size_t state_bytes() const noexcept { return 0; }
    virtual std::uint64_t bytes_sent() const noexcept { return 0; }
    // Waits, quietly, for everything still in flight (teardown after an error).
    virtual void abandon() noexcept = 0;
};

// Compressed when options.compression is enabled (Error(unsupported) unless the space is host
// memory; collective over the shard group, whose communicator the reducer splits), else the
// collectives.
std::unique_ptr<Reduction> make_reduction(const EngineContext &ctx);
std::unique_ptr<Reduction> make_compressed_reduction(const EngineContext &ctx); // compressed_reduction.cpp

} // namespace shardopt::engine

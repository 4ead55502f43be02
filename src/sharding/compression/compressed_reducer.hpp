// CompressedReducer: averages gradient buckets over a data group with fewer bytes on the wire
// (see include/shardopt/compression.hpp for the methods and the two-phase exchange).
//
// The engine starts a bucket's reduction as soon as the bucket is ready (start: compress, post
// the sends and receives, all asynchronous) and finishes it when it needs the result (finish:
// decompress, sum in rank order, and for an allreduce the second phase). Buckets must be
// finished in the order they were started on every rank (finish may run a collective).
//
// The reducer works on host memory, owns a communicator of its own (split from the data group,
// so its tags and collectives never meet the caller's), and keeps the error-feedback residuals
// and PowerSGD's warm-start matrices as state (state_bytes, save_state/load_state).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "shardopt/comm.hpp"
#include "shardopt/compression.hpp"
#include "shardopt/params.hpp"

namespace shardopt::compression {

enum class ReduceMode {
    allreduce,      // every rank gets the whole averaged bucket, in place
    reduce_scatter, // every rank gets only its chunk (ParameterSet's shard of the bucket)
};

class CompressedReducer {
  public:
    virtual ~CompressedReducer() = default;
    // bucket: the bucket's padded elements (host, the layout's dtype), the reducer's scratch until
    // finish (an allreduce leaves the average there). shard_out: where reduce_scatter puts this
    // rank's chunk. Every rank starts its buckets in the same order (start may issue a collective).
    virtual void start(int b, unsigned char *bucket, unsigned char *shard_out) = 0;
    virtual void finish(int b) = 0;
    // Waits, quietly, for every operation still in flight (teardown after an error).
    virtual void abandon() noexcept = 0;
    // Forgets the residuals (after a step skipped for non-finite gradients, which they hold).
    virtual void clear_residuals() = 0;
    // Residuals, warm-start matrices and payload buffers held.
    virtual std::size_t state_bytes() const noexcept = 0;
    // Bytes moved over the reducer's own communicator so far.
    virtual std::uint64_t bytes_sent() const noexcept = 0;
    // Error-feedback state of this rank as bytes (empty when none), and back; load_state
    // returns false (and changes nothing) for bytes of another shape.
    virtual std::vector<unsigned char> save_state() const = 0;
    virtual bool load_state(const std::vector<unsigned char> &bytes) = 0;
};

// A reducer for options.method over `group` (the reducer splits a communicator of its own off
// it: collective over group). layout: planned for group's size.
std::unique_ptr<CompressedReducer> make_compressed_reducer(Communicator &group, const ParameterSet &layout,
                                                           const CompressionOptions &options, ReduceMode mode);

// The bytes the reducer make_compressed_reducer builds holds (its state_bytes()) once it has
// reduced every bucket: residuals, warm-start matrices, payload buffers. layout: planned for the
// group; host_of_ranks: the group's (Communicator::host_of_ranks); hierarchy_allowed: what the
// ranks' SHARDOPT_HIERARCHY votes (hierarchy_allowed_here on each).
std::size_t compressed_reducer_bytes(const ParameterSet &layout, const CompressionOptions &options, ReduceMode mode,
                                     const std::vector<int> &host_of_ranks, bool hierarchy_allowed);
// This rank's vote: false when SHARDOPT_HIERARCHY switches the hierarchy off.
bool hierarchy_allowed_here();

// Throws Error(invalid_argument) naming the first compression option out of range.
void validate_compression_options(const CompressionOptions &options);

} // namespace shardopt::compression

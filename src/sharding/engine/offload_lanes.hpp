// OffloadLanes: what a space gives ZeRO-Offload (../offload/): page-locked host memory, copies
// between it and the space's memory on two lanes of their own (one per direction, so gradients
// going to the host and parameters coming back overlap each other and the compute and
// communicator streams), and the CPU update rules over host memory.
//
// Ordering: a copy to the host starts as soon as its lane reaches it; the caller guarantees its
// source is complete (a reduction whose Work completed). A copy to the device runs after
// everything issued on the compute stream before it (the caller's kernels may still read the
// memory it overwrites). Neither is seen by anything else until waited for: by the host (wait),
// or by the passes and collectives issued on the compute stream afterwards (compute_waits).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "space.hpp"

namespace shardopt::engine {

// A point on a copy lane: done once every copy issued on it up to this one is. The default
// mark is done already.
struct CopyMark {
    int lane = -1; // 0: to the host, 1: to the device
    std::uint64_t seq = 0;
    bool empty() const noexcept { return seq == 0; }
};

class OffloadLanes {
  public:
    virtual ~OffloadLanes() = default;

    // Zero-filled page-locked host memory; `what` names it in an out-of-memory error.
    virtual SpaceBufferPtr allocate_pinned(std::size_t bytes, const char *what) = 0;

    // Enqueue a copy of `bytes` from the space's memory into pinned host memory.
    virtual CopyMark copy_to_host_async(void *host, const void *src, std::size_t bytes) = 0;
    // Enqueue a copy of `bytes` from pinned host memory into the space's memory, after the work
    // issued on the compute stream so far.
    virtual CopyMark copy_to_device_async(void *dst, const void *host, std::size_t bytes) = 0;
    // The host waits (bounded by the communicator's timeout) until `mark` is done.
    virtual void wait(CopyMark mark) = 0;
    // The compute stream waits (on the device, the host does not) until `mark` is done.
    virtual void compute_waits(CopyMark mark) = 0;

    // The CPU update rules over `params` (spans of host memory), on the space's update threads.
    virtual std::unique_ptr<SpanUpdater> make_host_updater(const std::vector<Span> &params, DType dtype,
                                                           const OptimizerOptions &options) = 0;
    // Sum of squares of the host spans in order, in the same order of operations as the space's
    // sum_of_squares over its own memory, so a norm computed on either side is the same double.
    virtual double host_sum_of_squares(const std::vector<Span> &spans, DType dtype) = 0;
};

} // namespace shardopt::engine

// Space: where a ShardedOptimizer keeps its memory and runs its element-wise work.
//
// The engine (step_engine.*) decides which buffers exist, which collective moves what, and when
// the update runs; a space supplies the memory and the passes over it. The host space
// (host_space.cpp) is host memory, the CPU passes and the reference update rules spread over
// threads; the CUDA space (cuda_space.cpp) allocates device memory and enqueues everything on
// the caller's compute stream.
//
// Ordering contract: every pass (zero, add_into, scale, updates) runs after the passes issued
// before it, on one compute stream. before_collective(comm) orders the next collective issued
// on `comm` after everything issued on the compute stream so far (the caller's gradient
// computation included). A collective's Work completes when its result is in place, and the
// engine waits for it before issuing a pass that reads that result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "shardopt/comm.hpp"
#include "shardopt/optim.hpp"
#include "shardopt/types.hpp"

namespace shardopt::engine {

class OffloadLanes;

// Memory of a space, released by its destructor.
class SpaceBuffer {
  public:
    virtual ~SpaceBuffer() = default;
    virtual unsigned char *data() const noexcept = 0;
    virtual std::size_t bytes() const noexcept = 0;
};
using SpaceBufferPtr = std::unique_ptr<SpaceBuffer>;

// A run of `count` elements at `data` (memory of the space), part of tensor `tensor`. For an
// update's spans, what the rule needs to know of them (update_layout.hpp): where the span lies in
// its tensor and the tensor's shape, where its statistics start in the step's buffer per phase,
// and which of the tensor's shared low-bit blocks its first and last block are (npos: none).
struct Span {
    static constexpr std::size_t npos = Segment<float>::npos;
    Span() = default;
    Span(unsigned char *data_, std::size_t count_, int tensor_ = 0) : data(data_), count(count_), tensor(tensor_) {}
    unsigned char *data = nullptr;
    std::size_t count = 0;
    int tensor = 0;
    std::size_t offset = 0;
    TensorShape shape;
    std::size_t stats[Segment<float>::kMaxPhases] = {};
    std::size_t shared_first = npos, shared_last = npos;
    std::size_t restore = 0; // where its tensor's part of the restore buffer starts
};

// The base optimizer over a fixed list of parameter spans (one bucket's owned part): owns its
// state, counts its steps from 1. One update is begin_step, continue_step for each later phase,
// then apply; between them the engine combines the statistics of rules that have them (LAMB's
// per-tensor sums, the maxima of low-bit blocks) across the ranks that share a tensor or block
// (UpdateLayout says where each span's are).
class SpanUpdater {
  public:
    virtual ~SpanUpdater() = default;
    // Starts one update of every span; grads[i] has the count of span i. Where the rule has
    // statistics, adds span i's part of phase 0's into stats (at the span's Span::stats[0]).
    virtual void begin_step(const std::vector<const void *> &grads, double *stats) = 0;
    // Phase p >= 1 of the rule's statistics, once the earlier phases were combined across ranks.
    virtual void continue_step(int phase, double *stats) = 0;
    // Rules that transform whole matrices (Muon): span i's part of its matrix, which begin_step
    // wrote and apply reads (Segment::matrix), for the engine to assemble, transform once and
    // hand back; null for a span of no such matrix.
    virtual void *matrix_part(int span) { (void)span; return nullptr; }
    // Finishes it (stats: the combined statistics, or null). Enqueued, not waited for.
    virtual void apply(const double *stats) = 0;
    virtual void set_lr(double lr) = 0;
    // Bytes of optimizer state held (master weights included when kept).
    virtual std::size_t state_bytes() const noexcept = 0;
    virtual int state_slots() const noexcept = 0;
    // Synchronizing: state slot `slot` of span i into `host` (span count elements of the
    // parameters' dtype).
    virtual void read_state(int span, int slot, void *host) = 0;
    // Restore (checkpoints, synchronize_optimizer_state), synchronizing: state slot `slot` of
    // span i from `host`, and the steps taken (the next step() is step steps + 1, which is what
    // bias corrections and schedules count from). `restored`: where a rank cannot restore its part
    // alone (UpdateLayout::restore_exchange), what every rank's restore_parts added, combined;
    // else null (the span's `host` holds all it needs).
    virtual void write_state(int span, int slot, const void *host, const double *restored) = 0;
    // What span i's part of slot `slot` in `host` gives the ranks that share its tensor: the
    // largest |value| of its parts of split low-bit blocks, the per-tensor state it holds; into
    // `parts` (max) at Span::restore.
    virtual void restore_parts(int span, int slot, const void *host, double *parts) const {
        (void)span, (void)slot, (void)host, (void)parts;
    }
    virtual void set_step_count(std::int64_t steps) = 0;
};

class Space {
  public:
    virtual ~Space() = default;
    virtual const char *name() const noexcept = 0;
    // True when the space's memory is host memory the CPU may read and write directly.
    virtual bool host_accessible() const noexcept = 0;
    // The CUDA device the space's memory is on; -1 for host memory.
    virtual int device() const noexcept = 0;

    // Refuses (Error(unsupported) or invalid_argument, naming what) what the space cannot run:
    // parameters of `dtype`, the `optimizer`'s rule, with tensors split across ranks or not.
    virtual void check_supported(DType dtype, const OptimizerOptions &optimizer, bool tensors_split) const = 0;

    // Zero-filled (enqueued) buffer of `bytes`; `what` names it in an out-of-memory error.
    virtual SpaceBufferPtr allocate(std::size_t bytes, const char *what) = 0;

    // --- passes on the compute stream (enqueued) ---
    virtual void zero(void *data, std::size_t bytes) = 0;
    virtual void add_into(void *dst, const void *src, std::size_t count, DType dtype) = 0; // dst += src
    virtual void scale(void *data, std::size_t count, DType dtype, double factor) = 0;    // data *= factor
    virtual void copy(void *dst, const void *src, std::size_t bytes) = 0; // both the space's memory
    // Sum of squares of every span in order, accumulated in double; waits for the result.
    virtual double sum_of_squares(const std::vector<Span> &spans, DType dtype) = 0;

    // --- host transfers (wait until done) ---
    virtual void copy_from_host(void *dst, const void *host, std::size_t bytes) = 0;
    virtual void copy_to_host(void *host, const void *src, std::size_t bytes) = 0;

    // --- collectives ---
    virtual void before_collective(Communicator &comm) = 0;
    // allreduce of one host value over `comm` (through the space's memory when the
    // communicator needs it there).
    virtual double allreduce_scalar(Communicator &comm, double value, ReduceOp op) = 0;
    // `comm` (one the engine's buffers are reduced over) as a communicator whose calls take
    // host buffers, for the engine's collectives on host data (checkpoints, state agreement).
    // The host space returns comm itself; the CUDA space, an adapter that stages each call's
    // buffers through device memory (host_buffer_comm.hpp).
    virtual CommunicatorPtr host_access(CommunicatorPtr comm) = 0;

    // The base optimizer for `params` (spans of dtype elements in this space).
    virtual std::unique_ptr<SpanUpdater> make_updater(const std::vector<Span> &params, DType dtype,
                                                      const OptimizerOptions &options) = 0;

    // Waits until every pass issued so far has completed.
    virtual void synchronize() = 0;

    // ZeRO-Offload's copy lanes and CPU update (offload_lanes.hpp), or null when the space's
    // memory is host memory already (nothing to offload).
    virtual OffloadLanes *offload_lanes() { return nullptr; }
};

} // namespace shardopt::engine

// The engine behind ShardedOptimizer: one implementation parameterized by what the strategy
// shards, so DDP, ZeRO-1/2, FSDP, hybrid and LocalSGD share the step and differ only in where
// memory lives and which collective moves it.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "../optim/parallel_update.hpp"
#include "../params/aligned_buffer.hpp"
#include "hybrid_grid.hpp"
#include "shardopt/sharded_optimizer.hpp"

namespace shardopt {

// What a strategy keeps whole or sharded, and which collectives it runs.
struct StrategyPlan {
    bool reduce_grads = true;       // false: LocalSGD (local steps)
    bool grads_sharded = false;     // reduce-scatter into a shard; full gradient never held
    bool state_sharded = false;     // optimizer state (and update) only for the own shard
    bool params_sharded = false;    // FSDP: parameters sharded at rest
    bool gather_after_step = false; // ZeRO-1/2: allgather updated shards
    int average_params_every = 0;   // LocalSGD period

    static StrategyPlan of(Strategy data_strategy, const ShardingOptions &options);
};

// A slice of one tensor that an update, norm or LAMB statistic runs over.
struct OwnedSegment {
    int tensor;
    std::size_t flat;  // element index in the padded flat layout
    std::size_t local; // element index in this rank's storage (flat, or shard index)
    std::size_t count;
};

// Chunk `group_rank` of every bucket, cut at tensor boundaries (what a rank owns when state is
// sharded), and every tensor whole (when it is not). `local` indexes the shard buffer in the
// first, the flat buffer in the second.
std::vector<OwnedSegment> owned_chunks(const ParameterSet &layout, int group_rank);
std::vector<OwnedSegment> whole_tensors(const ParameterSet &layout);

// Waits for `work` (if any) and drops it, ignoring its error: for teardown, where all that
// matters is that nothing still reads or writes the buffers.
void finish_quietly(WorkPtr &work) noexcept;

// Throws Error(invalid_argument) naming the first option out of range or inconsistent.
void validate_sharding_options(const ShardingOptions &options);

// Packed copy (every tensor in order) of a host buffer laid out over the layout's buckets: the
// full padded buffer when `shard` is null, else this rank's shard buffer, gathered bucket by
// bucket over `shard` (collective there).
void gather_packed(const ParameterSet &layout, Communicator *shard, const unsigned char *base, void *packed);

// synchronize_optimizer_state, for both engines. First the agreement: throws Error(mismatch)
// on every rank of `group` when they disagree on the step count, layout, optimizer kind or lr.
void check_state_agreement(Communicator &group, std::int64_t step_count, const ParameterSet &layout,
                           const OptimizerOptions &optimizer);
// Then what makes replicated data identical: for each part (k < 0 the parameters, k >= 0
// state slot k) held replicated, in order, the communicator to make it identical over and
// how (LocalSGD averages, its replicas drift by design; the others take rank 0's copy).
enum class SyncOp { average, broadcast_from_0 };
void for_each_replicated_part(const StrategyPlan &plan, const HybridGrid &grid, int state_slots,
                              const std::function<void(int part, Communicator &comm, SyncOp op)> &fn);

class ShardedOptimizer::Impl {
  public:
    Impl(ShardedOptimizer &owner, HybridGrid grid, StrategyPlan plan, void *external_params);

    ShardedOptimizer &owner;
    HybridGrid grid;
    StrategyPlan plan;
    DType dtype;
    std::size_t elem;
    int group_rank, group_size;

    // Storage. params/grads/state are full padded buffers or this rank's shard.
    AlignedBuffer params_storage;
    unsigned char *params = nullptr;
    AlignedBuffer grads;       // full (unsharded grads) or shard
    std::vector<AlignedBuffer> state;
    AlignedBuffer accumulation; // full, only with gradient accumulation

    // Gradient staging (sharded grads): bucket-sized buffers, each open for one bucket.
    struct Staging {
        AlignedBuffer buffer;
        int bucket = -1;
    };
    std::vector<Staging> staging;

    // Per-bucket progress within a step.
    enum class BucketPhase { idle, open, reducing, done };
    struct BucketProgress {
        BucketPhase phase = BucketPhase::idle;
        WorkPtr work;
        int staging_index = -1;
    };
    std::vector<BucketProgress> buckets;
    std::vector<int> reduce_order; // buckets in the order their reduction was issued
    int micro_step = 0;

    // FSDP gathered units.
    struct Unit {
        AlignedBuffer buffer;
        WorkPtr work;
        bool gathered = false;
    };
    std::vector<Unit> units;
    std::vector<AlignedBuffer> free_unit_buffers;
    int last_gathered = -1;

    // ZeRO-1/2 with overlap_param_gather: post-update allgathers still in flight, per bucket.
    std::vector<WorkPtr> param_gathers;
    void wait_param_gather(int b);
    void wait_param_gathers();
    // Waits for every collective still reading or writing our buffers (reductions, parameter
    // and unit gathers), ignoring their errors: for destruction.
    void finish_in_flight() noexcept;

    std::vector<OwnedSegment> chunk_segments;  // chunk group_rank of every bucket, per tensor
    std::vector<OwnedSegment> update_segments; // what this rank updates
    std::size_t peak_buffer_bytes = 0;
    ParallelUpdate updater; // update_segments spread over ShardingOptions::update_threads

    bool final_micro_step() const;
    void start_micro_step();
    unsigned char *bucket_grad(int b);
    void grad_ready(int b);
    StepResult step();
    void *gather(int b);
    void release(int b);
    void get_parameters(void *packed);
    void set_parameters(const void *packed);
    void synchronize_state();
    std::size_t buffer_bytes() const;
    // Checkpoint hooks: drop gathered FSDP units (their contents go stale when the shards are
    // replaced), gather state slot k into packed form (collective like get_parameters), and
    // replace parameters, state (buffers of the same sizes), step count and lr (cannot fail).
    void release_all_units();
    void get_state(int k, void *packed);
    void restore(const std::vector<unsigned char> &new_params, const std::vector<std::vector<unsigned char>> &new_state,
                 std::int64_t step_count, double lr);

  private:
    int take_staging(int b);
    void launch_reduction(int b, unsigned char *buffer);
    void wait_reductions();
    unsigned char *grad_at(const OwnedSegment &s);
    unsigned char *param_at(const OwnedSegment &s);
    double global_sum_of_squares();
    void apply_update(double clip_factor);
    void gather_params_after_step();
    void average_params();
    void start_gather(int b);
    void note_buffers();
};

} // namespace shardopt

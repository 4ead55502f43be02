// StepEngine: the one engine behind ShardedOptimizer, for every strategy and memory space.
//
// It runs the step protocol of sharded_optimizer.hpp over a StrategyPlan (../strategies/):
// which buffers exist (full or shard), which collective reduces each bucket, what is gathered
// when. Every buffer and element-wise pass belongs to a Space (host memory or a GPU), which
// also orders collectives after its compute stream. The update runs bucket by bucket (one
// SpanUpdater per bucket), so a bucket's post-update allgather overlaps the next bucket's
// update. With ZeRO-Offload (engine_offload.cpp) the update runs on the CPU over host copies,
// following an OffloadSchedule (../offload/).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../compression/compressed_reducer.hpp"
#include "../hybrid_grid.hpp"
#include "../offload/offload_plan.hpp"
#include "../offload/offload_schedule.hpp"
#include "../optimizer_backend.hpp"
#include "../../params/owned_segments.hpp"
#include "../strategies/strategy_plan.hpp"
#include "offload_lanes.hpp"
#include "space.hpp"
#include "shardopt/sharded_optimizer.hpp"

namespace shardopt::engine {

class StepEngine final : public OptimizerBackend {
  public:
    // Collective over comm (builds the hybrid grid). `initial`: host, packed, null for zeros.
    // `external_params`: the caller's parameter buffer (memory of the space, padded_count
    // elements), or null for the engine's own.
    StepEngine(std::unique_ptr<Space> space, CommunicatorPtr comm, ParameterSet layout,
               const OptimizerOptions &optimizer, const ShardingOptions &options, const void *initial,
               void *external_params = nullptr);
    ~StepEngine();
    StepEngine(const StepEngine &) = delete;
    StepEngine &operator=(const StepEngine &) = delete;

    Communicator &communicator() noexcept override { return *comm_; }
    const OptimizerOptions &optimizer_options() const noexcept override { return optimizer_; }
    const Space &space() const noexcept { return *space_; }
    const ParameterSet &layout() const noexcept override { return layout_; }
    const ShardingOptions &options() const noexcept override { return options_; }
    const HybridGrid &grid() const noexcept { return grid_; }
    std::int64_t step_count() const noexcept override { return step_count_; }
    void set_learning_rate(double lr) override;
    ShardedOptimizer::GridPosition grid_position() const noexcept override;
    CommunicatorPtr data_group() const noexcept override { return grid_.data; }
    CommunicatorPtr tensor_group() const noexcept override { return grid_.tensor; }
    CommunicatorPtr pipeline_group() const noexcept override { return grid_.pipeline; }

    void *parameters() override;
    void *tensor_parameters(int t) override;
    void *gather(int b) override;
    void release(int b) override;
    void get_parameters(void *packed_host) override;
    void set_parameters(const void *packed_host) override;

    void zero_grad() override;
    void *bucket_grad(int b) override;
    void *grad(int t) override;
    void grad_ready(int b) override;
    StepResult step() override;
    // Every bucket's gradient from a packed host buffer, then step().
    StepResult step_on_packed_gradient(const void *packed_grad) override;
    double allreduce_over_data(double value, ReduceOp op) override;

    MemoryStats memory_stats() const override;
    // Bytes moved so far over every communicator the engine uses (Communicator::bytes_sent).
    std::uint64_t bytes_sent() const override;

    // --- checkpoints and state (engine_checkpoint.cpp) ---
    void save(const std::string &dir, CheckpointForm form) override;
    std::unique_ptr<AsyncCheckpoint> save_async(const std::string &dir) override;
    void load(const std::string &dir) override;
    std::vector<unsigned char> serialize() override;
    void deserialize(const void *data, std::size_t size) override;
    void synchronize_optimizer_state() override;
    bool should_early_stop(bool local_vote) override;
    // The training loop (src/training/step_loop.cpp) over this engine.
    OptimizeResult optimize(const ModelFunction &model, const OptimizeOptions &options) override;

  private:
    class CheckpointView; // the engine as a checkpoint::CheckpointTarget
    enum class BucketPhase { idle, open, reducing, done };
    struct BucketProgress {
        BucketPhase phase = BucketPhase::idle;
        WorkPtr work;
        bool compressed = false; // reduced by compressor_: finished by its finish(b)
        int staging_index = -1;
    };
    struct Staging {
        SpaceBufferPtr buffer;
        int bucket = -1;
        CopyMark read_by_copy; // ZeRO-Offload: the copy of a reduced gradient out of it
    };
    struct Unit { // FSDP: a gathered bucket
        SpaceBufferPtr buffer;
        WorkPtr work;
        bool gathered = false;
    };
    // One bucket's part of the update: its owned segments and the optimizer over them.
    struct BucketUpdate {
        std::vector<OwnedSegment> segments;
        std::unique_ptr<SpanUpdater> updater;
    };

    // `initial` (host, packed) as the parameters: rank 0's of the data group unless
    // ShardingOptions::broadcast_initial is off.
    void set_initial_parameters(const void *initial);
    bool final_micro_step() const;
    int take_staging(int b);
    unsigned char *open_bucket(int b);
    void launch_reduction(int b, unsigned char *buffer);
    void wait_reductions();
    // Waits for bucket b's reduction in flight (if any) and completes it.
    void await_reduction(int b);
    // traffic() since the last call (StepResult::bytes_sent).
    std::uint64_t take_traffic();
    unsigned char *grad_at(const OwnedSegment &s) const;
    unsigned char *param_at(const OwnedSegment &s) const;
    double global_sum_of_squares();
    void update_and_gather(double clip);
    void wait_param_gather(int b);
    void wait_param_gathers();
    void average_params();
    void start_gather(int b);
    void release_all_units();
    SpaceBufferPtr take_unit_buffer();
    std::size_t buffer_bytes() const;
    void note_buffers();
    void finish_in_flight() noexcept;
    // State slot k as the checkpoint parts lay it out on the host (full padded buffer, or the shard
    // buffer when state is sharded), read span by span from the updaters (unowned elements and
    // padding 0); and written back the same way.
    std::vector<unsigned char> state_to_host(int k);
    void state_from_host(int k, const unsigned char *host);
    // Gradient compression's per-rank state (residuals, LocalSGD's anchor) for checkpoints, and
    // back (null or bytes that do not fit: residuals cleared).
    std::vector<unsigned char> compression_state();
    void restore_compression_state(const std::vector<unsigned char> *bytes);
    // `comm` (one of the grid's) as a communicator taking host buffers; made once per communicator.
    Communicator &host_comm(Communicator &comm);
    // Bucket b's reduction in flight has finished: waits for it, and with ZeRO-Offload starts
    // the copy of its gradient to the host.
    void complete_reduction(int b);
    // Gradients go through bucket staging buffers (ZeRO-2, FSDP; any strategy whose reduced
    // gradients are offloaded).
    bool grads_staged() const noexcept { return plan_.grads_sharded() || offload_.gradients; }
    std::size_t staging_bytes() const;
    // The parameters at rest are host memory (the host space, or cpu_offload_params).
    bool params_on_host() const noexcept { return space_->host_accessible() || offload_.params; }
    // Replaces the parameters at rest with `host` (params_->bytes() bytes laid out as params_),
    // keeping ZeRO-Offload's master weights equal to them.
    void write_params(const unsigned char *host);
    // FSDP: starts unit b's allgather into its buffer (from the host shard with cpu_offload_params).
    void gather_unit(int b);
    void finish_copies() noexcept;

    // --- ZeRO-Offload (engine_offload.cpp) ---
    // Host buffers, updaters over them, the schedule; called by the constructor.
    void set_up_offload(const std::vector<OwnedSegment> &owned);
    // Runs the schedule's ops. `clip`: begin_update's gradient scale; `stats`: LAMB's statistics;
    // norm_on_host's sum of squares goes to *sumsq.
    void run(const std::vector<OffloadOp> &ops, double clip = 1.0, std::vector<double> *stats = nullptr,
             double *sumsq = nullptr);
    // Reductions finished by now, in issue order, without waiting (during the backward).
    void poll_reductions();
    // The device region of bucket b's reduced owned region, and where its updated parameters go.
    const unsigned char *reduced_owned_region(int b) const;
    unsigned char *device_owned_params(int b) const;
    // Host address of segment s in the host buffers (laid out as owned_region says).
    unsigned char *host_at(const SpaceBufferPtr &buffer, const OwnedSegment &s) const;
    double host_sum_of_squares();
    void offload_update(double clip);
    // The master weights again from the device's parameters (after they were replaced there).
    void refresh_master();

    std::unique_ptr<Space> space_;
    CommunicatorPtr comm_;
    ParameterSet layout_;
    OptimizerOptions optimizer_;
    ShardingOptions options_;
    HybridGrid grid_;
    StrategyPlan plan_;
    std::size_t elem_;
    int group_rank_, group_size_;
    std::int64_t step_count_ = 0;

    SpaceBufferPtr params_; // full padded buffer, or the shard (FSDP)
    SpaceBufferPtr grads_;  // full padded buffer, or the shard (ZeRO-2, FSDP)
    SpaceBufferPtr accumulation_;
    std::vector<Staging> staging_;
    std::vector<BucketProgress> buckets_;
    std::vector<int> reduce_order_;
    int micro_step_ = 0;
    std::vector<Unit> units_;
    std::vector<SpaceBufferPtr> free_unit_buffers_;
    int last_gathered_ = -1;
    std::vector<WorkPtr> param_gathers_;
    std::vector<OwnedSegment> chunk_segments_;
    std::vector<BucketUpdate> updates_; // per bucket
    int state_slots_ = 0;
    std::size_t peak_buffer_bytes_ = 0;
    std::vector<std::pair<Communicator *, CommunicatorPtr>> host_comms_; // host_comm's, by communicator
    // Gradient compression (options_.compression): the reducer, and for LocalSGD the parameters
    // of the last averaging (what is averaged, compressed, is the change since) and a bucket of
    // scratch.
    std::unique_ptr<compression::CompressedReducer> compressor_;
    SpaceBufferPtr anchor_, delta_;
    bool anchor_synced_ = false; // anchor_ holds parameters every rank shares
    std::uint64_t traffic_at_last_step_ = 0;
    // ZeRO-Offload: what is offloaded, the space's lanes, the schedule, the host buffers
    // (reduced gradients and master weights of the owned regions, owned_region's layout), and the
    // last copy of each bucket's data in each direction.
    OffloadPlan offload_;
    OffloadLanes *lanes_ = nullptr;
    std::unique_ptr<OffloadSchedule> schedule_;
    SpaceBufferPtr host_grads_, host_master_;
    std::vector<CopyMark> grads_copied_, params_copied_;
};

} // namespace shardopt::engine

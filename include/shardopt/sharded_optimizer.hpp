// ShardedOptimizer: a base optimizer made distributed. One object per rank; it owns its part of
// the parameters, gradients and optimizer state as the strategy prescribes, and performs
// exactly one optimizer update per step.
//
//   strategy   params at rest   gradients kept        optimizer state   after the update
//   ddp        full             full, allreduce(avg)  full              -
//   zero1      full             full, allreduce(avg)  own shard         allgather params
//   zero2      full             own shard (reduce-    own shard         allgather params
//                               scatter per bucket)
//   fsdp       own shard        own shard             own shard         - (gather per unit)
//   hybrid     a data x tensor x pipeline grid; any of the above inside the data group
//   local_sgd  full             local only            full (local)      params averaged every H steps
//   async_sgd  full (a view)    pushed point to point own shard         owners send new versions
//              to the shards' owners, no collective (bounded staleness: shardopt/async_sgd.hpp)
//
// Memory: ShardingOptions::memory picks where parameters, gradients, optimizer state and
// staging buffers live: host memory (any communicator), or CUDA device memory (a GPU
// communicator: nccl or staged). The strategies, step protocol, results and checkpoints are the
// same in both; only the pointers the optimizer hands out differ (device memory for cuda). See
// docs/gpu.md for the streams a CUDA optimizer uses.
//
// Step protocol (per rank, every rank the same sequence):
//   zero_grad();
//   for each bucket b, in any order:  fill grad(t) for b's tensors (or bucket_grad(b)); grad_ready(b);
//   step();
// grad_ready(b) starts b's reduction at once, so it overlaps the computation of later buckets.
// Buckets never marked ready are reduced by step(). FSDP: gather(b) before using a unit's
// parameters (forward or backward), release(b) after.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "shardopt/async_checkpoint.hpp"
#include "shardopt/comm.hpp"
#include "shardopt/compression.hpp"
#include "shardopt/optim.hpp"
#include "shardopt/params.hpp"
#include "shardopt/training.hpp"

struct CUstream_st; // cudaStream_t is CUstream_st *

namespace shardopt {

// Values are part of the C ABI (shardopt_strategy) and of checkpoints: never renumber.
enum class Strategy : int32_t { ddp = 0, zero1 = 1, zero2 = 2, fsdp = 3, hybrid = 4, local_sgd = 5, async_sgd = 6 };
const char *strategy_name(Strategy strategy) noexcept;

// Where an optimizer keeps its memory. Values are part of the C ABI (shardopt_memory_space).
enum class MemorySpace : int32_t { host = 0, cuda = 1 };
const char *memory_space_name(MemorySpace space) noexcept;

struct ShardingOptions {
    Strategy strategy = Strategy::ddp;
    // Micro-steps whose gradients are summed locally (no communication) before one update;
    // the update uses their mean.
    int gradient_accumulation_steps = 1;
    // Clip the global gradient norm (over all ranks and shards) to this value; 0 = off.
    double max_grad_norm = 0.0;
    // Skip the update on every rank when any gradient is NaN/Inf (reported by step()).
    bool skip_nonfinite = true;
    // ZeRO-2/FSDP: bucket-sized gradient staging buffers. 1 holds the least memory; more let
    // the reduction of one bucket overlap the filling of the next.
    int staging_buffers = 1;
    // FSDP: gather(u) also starts gathering the unit expected next (one extra unit held while
    // prefetched): the one the previous step gathered after u, or in the first step u+1 / u-1 in the
    // direction of travel. Never past the two units the memory plan counts.
    bool fsdp_prefetch = true;
    // Hybrid grid; -1 for data_parallel_size means "the rest of the world". The strategy used
    // inside each data-parallel group is hybrid_data_strategy (ddp, zero1, zero2 or fsdp);
    // HSDP is hybrid with fsdp inside a group and replication across groups
    // (hsdp_replicas > 1 splits the data group into that many replicated sub-groups).
    int pipeline_parallel_size = 1;
    int tensor_parallel_size = 1;
    int data_parallel_size = -1;
    Strategy hybrid_data_strategy = Strategy::ddp;
    int hsdp_replicas = 1;
    // LocalSGD: average parameters every period steps.
    int local_sgd_period = 4;
    // async_sgd: allowStaleness, the clocks a gradient may lag behind the parameters it is applied
    // to (0 = synchronous, DDP's result bit for bit). See shardopt/async_sgd.hpp.
    int async_staleness = 0;
    // Threads for the optimizer update on this rank (the calling thread included); 0 = automatic:
    // SHARDOPT_NUM_THREADS, else the hardware concurrency (at most 16). Updates under 64K
    // elements run on the calling thread. Results are bitwise the same for any value.
    int update_threads = 0; // 0 = automatic
    // ZeRO-1/2: leave the post-update parameter allgather running when step() returns, so it
    // overlaps whatever the caller does next (typically the next forward). The parameters of
    // bucket b are complete once gather(b), tensor_parameters(), parameters(),
    // get_parameters() or the next step() is called; a pointer kept from before must not be
    // read until then. Off by default: with it off, step() returns with parameters complete.
    bool overlap_param_gather = false;
    // The `initial` parameters given to create() are rank 0's, broadcast over each data-parallel
    // group (as PyTorch DDP does), so replicas cannot start apart; false keeps every rank's own.
    bool broadcast_initial = true;
    // Where the optimizer's memory lives. cuda: parameters, gradients, state and buffers in the
    // device memory of the communicator's GPU (an nccl or staged communicator); the optimizer
    // enqueues its passes on cuda_stream (null: the legacy default stream), where the caller
    // computes gradients. Pointers it returns are then device memory; initial,
    // get_parameters/set_parameters, optimize's callback and checkpoints take host memory.
    // f32 parameter sets only on cuda, and LAMB only where no tensor's update is split across
    // ranks (ddp, local_sgd): Error(unsupported) otherwise.
    MemorySpace memory = MemorySpace::host;
    CUstream_st *cuda_stream = nullptr;
    // Gradient compression of every gradient reduction (and of LocalSGD's parameter averaging):
    // see shardopt/compression.hpp. Host memory only (Error(unsupported) for cuda memory).
    CompressionOptions compression;
    // ZeRO-Offload (docs/offload.md; AiDotNet's CpuOffloadOptimizer, CpuOffloadGradients,
    // CpuOffloadParams). They act on cuda memory only; with host memory they are accepted and
    // change nothing, since everything already is in host memory (memory_stats() too).
    //  - cpu_offload_optimizer: the optimizer state and the fp32 master weights of this rank's
    //    owned part live in host memory and the update runs on the CPU (the host rules, on
    //    update_threads threads). Each bucket's reduced gradient is copied to pinned host memory
    //    as its reduction completes, and its updated parameters back to the device while the next
    //    bucket is updated. Results are those of the same optimizer in host memory, bit for bit.
    //  - cpu_offload_gradients (needs cpu_offload_optimizer): the reduced gradients are kept in
    //    host memory only; the device holds bucket-sized staging buffers for the reductions.
    //  - cpu_offload_params (needs cpu_offload_optimizer; fsdp, or hybrid with fsdp inside): the
    //    parameter shard at rest lives in host memory, where the update writes it; gather(u)
    //    copies unit u's shard to the device and gathers the unit there (prefetching the next).
    // Not with local_sgd or hsdp_replicas > 1 (Error(invalid_argument)); the CPU update also runs
    // LAMB with tensors split across ranks, which the device kernels refuse.
    bool cpu_offload_optimizer = false;
    bool cpu_offload_gradients = false;
    bool cpu_offload_params = false;
    // AiDotNet's ShardingConfiguration, resolved by create() into the fields above (see
    // src/sharding/sharding_configuration.hpp):
    //  - parameter_group_size (MinimumParameterGroupSize): > 0 cuts the layout into buckets of
    //    about this many elements (its end_bucket boundaries kept) instead of its bucket_bytes.
    //  - learning_rate (LearningRate): > 0 replaces the optimizer options' lr.
    //  - auto_sync_gradients (AutoSyncGradients): false turns ddp and zero1 into local_sgd; the
    //    other strategies reduce gradients every step and refuse it.
    std::size_t parameter_group_size = 0;
    double learning_rate = 0.0;
    bool auto_sync_gradients = true;
};

// Throws Error(invalid_argument) naming the first option out of range or in a combination the
// strategy does not allow (what create() checks before anything else).
void validate_sharding_options(const ShardingOptions &options);
// auto_sync_gradients false (Local SGD) needs replicated parameters: the strategy must be ddp, zero1
// or local_sgd (create checks it before it turns ddp/zero1 into local_sgd; the C ABI's validate too).
void validate_auto_sync(const ShardingOptions &options);

// The layout as an optimizer with these options cuts it: parameter_group_size, when set,
// replaces its bucket_bytes (its end_bucket boundaries kept). Unplanned.
ParameterSet bucketed_layout(ParameterSet layout, const ShardingOptions &options);

// Checkpoint forms (see save()).
enum class CheckpointForm : int32_t { sharded = 0, consolidated = 1 };

struct StepResult {
    bool applied = false;          // an optimizer update happened
    bool skipped_nonfinite = false; // gradients had NaN/Inf on some rank: update skipped everywhere
    bool accumulating = false;     // a micro-step of gradient accumulation: no update yet
    double grad_norm = 0.0;        // global norm of the averaged gradient (before clipping)
    // Where step() spent its time: waiting for gradient reductions still in flight (what the
    // caller's computation did not hide), the optimizer update, and the collectives after it
    // (ZeRO parameter allgather, LocalSGD averaging).
    double reduce_wait_seconds = 0.0;
    double update_seconds = 0.0;
    double post_update_seconds = 0.0;
    // Bytes this rank moved over the optimizer's communicators since the previous step()
    // returned (gradient reduction, parameter gathers, norms): Communicator::bytes_sent.
    std::uint64_t bytes_sent = 0;
};

struct MemoryStats {
    std::size_t params_bytes = 0;          // parameters held at rest
    std::size_t grads_bytes = 0;           // gradients held (full or shard)
    std::size_t optimizer_state_bytes = 0; // base optimizer state held
    std::size_t buffer_bytes = 0;          // staging, gathered units, accumulation buffers now
    std::size_t peak_buffer_bytes = 0;     // most buffer bytes held at once so far
    // Gradient compression: error-feedback residuals, PowerSGD's Q matrices, payload buffers,
    // LocalSGD's last averaged parameters.
    std::size_t compression_bytes = 0;
    // The fields above count the optimizer's memory space (device memory for cuda); total() is
    // their sum. ZeRO-Offload (cuda memory with cpu_offload_*) also holds host memory: the
    // parameter shard at rest (cpu_offload_params), the reduced gradients of the rank's owned part
    // (pinned), and the optimizer state with the fp32 master weights. 0 without offload and in
    // host memory, where the fields above are host memory already.
    std::size_t host_params_bytes = 0;
    std::size_t host_grads_bytes = 0;
    std::size_t host_optimizer_state_bytes = 0;
    std::size_t total() const {
        return params_bytes + grads_bytes + optimizer_state_bytes + buffer_bytes + compression_bytes;
    }
    std::size_t host_total() const { return host_params_bytes + host_grads_bytes + host_optimizer_state_bytes; }
};

// optimize(): the AiDotNet-style training loop on top of step().
struct OptimizeOptions {
    std::int64_t num_samples = 0;   // data set size; samples are split across data-parallel ranks
    std::int64_t batch_size = 0;    // global batch per step (0 = the whole data set)
    int epochs = 1;
    std::int64_t max_iterations = 0; // 0 = no limit beyond epochs
    int patience = 0;                // epochs without improvement before stopping; 0 = never
    double min_delta = 0.0;          // improvement smaller than this does not count
    // Visit the samples of each epoch in a fresh random order, the same on every rank (as a
    // distributed sampler does): the permutation depends only on seed and the epoch.
    bool shuffle = false;
    std::uint64_t seed = 0;
    // The number of the first epoch this call runs, as far as the shuffle order goes: a loop that
    // calls optimize() once per epoch passes its epoch, and visits the samples as one call over
    // every epoch would.
    int first_epoch = 0;
    // Resuming a run (ElasticOptimizer): the number of its iterations (batches, counted over its
    // epochs from the first) already done; they are skipped, without model calls or steps, and
    // count towards max_iterations and OptimizeResult::iterations. The loss of the epoch it
    // resumes in is the mean over its remaining batches; epochs skipped whole are not in the
    // loss history. C++ only.
    std::int64_t start_iteration = 0;
    // Called on every rank after each iteration's step() with its result (ElasticOptimizer's
    // periodic checkpoints); it may run collectives, as every rank calls it at the same point.
    // C++ only.
    std::function<void(const StepResult &)> after_step;
};

// Model callback: mean loss over the given samples at `params` (packed, all tensors in order),
// writing the mean gradient into `grad` (packed, same layout). Called on every rank with that
// rank's samples. A loss that is NaN or infinite (averaged over the data-parallel ranks) stops
// optimize() on every rank with Error(invalid_state) naming the epoch and iteration.
using ModelFunction = std::function<double(const void *params, void *grad, const std::int64_t *samples,
                                           std::size_t sample_count)>;

struct OptimizeResult {
    std::vector<unsigned char> best_parameters; // packed, the dtype of the parameter set
    double best_loss = 0.0;
    std::vector<double> loss_history; // mean loss of each epoch
    std::int64_t iterations = 0;
    bool stopped_early = false;
};

class OptimizerBackend;  // src/sharding/optimizer_backend.hpp
class AsyncSgdOptimizer; // shardopt/async_sgd.hpp

class ShardedOptimizer {
  public:
    // Collective over comm. The layout is planned for the strategy's group; `initial` (packed,
    // host memory, may be null for zeros) is taken from rank 0 (see broadcast_initial). Ranks
    // whose options or layouts differ fail, every one of them, with Error(mismatch) naming the
    // first difference. `external_params`
    // (DDP, ZeRO-1/2, LocalSGD) makes the caller's buffer of layout.padded_count() elements
    // (in options.memory) the parameter storage. Throws Error(unsupported) for cuda memory when
    // built without CUDA or without a usable device, Error(invalid_argument) for cuda memory over
    // a communicator that is not a GPU one.
    static std::unique_ptr<ShardedOptimizer> create(CommunicatorPtr comm, ParameterSet layout,
                                                    const OptimizerOptions &optimizer,
                                                    const ShardingOptions &options, const void *initial = nullptr,
                                                    void *external_params = nullptr);
    ~ShardedOptimizer();
    ShardedOptimizer(const ShardedOptimizer &) = delete;
    ShardedOptimizer &operator=(const ShardedOptimizer &) = delete;

    int rank() const noexcept;
    int world_size() const noexcept;
    Strategy strategy() const noexcept { return options().strategy; }
    const ShardingOptions &options() const noexcept;
    const ParameterSet &layout() const noexcept;
    // The base optimizer's options; lr is the current learning rate.
    const OptimizerOptions &optimizer_options() const noexcept;
    void set_learning_rate(double lr);
    std::int64_t step_count() const noexcept;
    Communicator &communicator() noexcept;

    // Hybrid process grid (for non-hybrid strategies: pp = tp = 1, dp = world). The model uses
    // tensor_group() for its tensor-parallel collectives and pipeline_group() to pass
    // activations between stages; gradients are reduced in data_group().
    struct GridPosition {
        int pp_rank = 0, tp_rank = 0, dp_rank = 0;
        int pp_size = 1, tp_size = 1, dp_size = 1;
    };
    GridPosition grid_position() const noexcept;
    CommunicatorPtr data_group() const noexcept;
    CommunicatorPtr tensor_group() const noexcept;   // null unless hybrid
    CommunicatorPtr pipeline_group() const noexcept; // null unless hybrid

    // --- parameters (memory of options().memory) ---
    // Full padded flat buffer (not for FSDP, whose parameters are sharded at rest).
    void *parameters();
    // Parameters of tensor t: always for DDP/ZeRO; for FSDP only while its unit is gathered.
    void *tensor_parameters(int t);
    // Packed host copy of all parameters (collective for FSDP and hybrid).
    void get_parameters(void *packed);
    // Replace all parameters from a packed host buffer, identical on every rank (not collective).
    void set_parameters(const void *packed);
    // FSDP units (= buckets): gather makes the unit's full parameters available (collective over
    // the group), release frees them. Other strategies: gather returns the resident pointer.
    void *gather(int bucket);
    void release(int bucket);

    // --- step protocol ---
    void zero_grad();
    void *bucket_grad(int bucket); // opens b's gradient buffer (zeroed); see the protocol above
    void *grad(int tensor);        // gradient of tensor t inside its (opened) bucket
    void grad_ready(int bucket);
    StepResult step();

    // --- state ---
    // Replicated state made identical on every rank (from rank 0; LocalSGD: averaged), sharded
    // state checked for consistency (step count, layout, optimizer); throws Error(mismatch) on
    // disagreement.
    void synchronize_optimizer_state();
    // True on every rank when any rank votes to stop.
    bool should_early_stop(bool local_vote);
    MemoryStats memory_stats() const;
    // Bytes this rank has moved over the optimizer's communicators so far (gradient reduction,
    // compressed or not, parameter gathers, norms; not the caller's own traffic): the sum of their
    // Communicator::bytes_sent. StepResult::bytes_sent is the part of one step.
    std::uint64_t bytes_sent() const;

    // The model callback works on host memory (for cuda memory the packed parameters are copied
    // from the device each iteration, and its gradient into the device buckets).
    OptimizeResult optimize(const ModelFunction &model, const OptimizeOptions &options);
    // The training policy every language shares (shardopt/training.hpp): epochs, schedule,
    // validation, best solution, early stopping. Collective over the world. optimize() is a
    // train() call with its own option names and AiDotNet's policy off.
    TrainingResult train(const BatchFunction &model, const TrainingOptions &options);

    // Strategy async_sgd: the asynchronous optimizer behind this one (its statistics), else null.
    // It trains through optimize() only: the step protocol (zero_grad ... step) throws
    // Error(unsupported), gather/release and tensor_parameters give its view of the parameters.
    AsyncSgdOptimizer *async_sgd() noexcept;

    // --- checkpoints (all collective over the world; see src/checkpoint/) ---
    // Contents: parameters, optimizer state, step count, learning rate, optimizer and sharding
    // options, and the parameter layout (names, counts, dtype). Refused with
    // Error(invalid_state) in the middle of gradient accumulation. Pipeline stages each save their
    // own tensors under the whole model's layout, and tensors are matched by name on load, so a
    // checkpoint loads at any pipeline depth or into an optimizer over the whole model (names must
    // be unique across stages). Hybrid grids with tensor parallelism are not supported
    // (Error(unsupported)). The files do not depend on the memory space: a checkpoint saved from
    // either loads into the other.
    //
    // save(dir): sharded form = every rank writes its own shard file in parallel, then rank 0
    // writes the manifest `dir/checkpoint.shardopt` (the checkpoint exists only once it is in
    // place); consolidated form = rank 0 writes everything into the manifest file, plus the
    // parameters as `dir/model.safetensors`. Files are replaced atomically; an interrupted
    // save leaves the previous checkpoint loadable.
    void save(const std::string &dir, CheckpointForm form = CheckpointForm::sharded);
    // The sharded save with its writing overlapping training (shardopt/async_checkpoint.hpp):
    // collective; copies this rank's shard to host memory and returns while a thread writes it.
    // Refused as save() is. The result must not outlive the optimizer.
    std::unique_ptr<AsyncCheckpoint> save_async(const std::string &dir);
    // Loads a checkpoint of either form saved by any world size and strategy (resharding).
    // Validates everything before changing anything: on any error (Error(corrupt), io,
    // invalid_argument for a layout or optimizer mismatch) every rank throws and the
    // optimizer is unchanged. (cuda memory: a device failure while the validated contents are
    // copied in leaves it partly loaded: load again.)
    void load(const std::string &dir);
    // The consolidated form in memory; every rank gets the same bytes. Each rank holds its own
    // parts, the bytes and one window (SHARDOPT_CHECKPOINT_WINDOW_BYTES), nothing gathered.
    std::vector<unsigned char> serialize();
    // The same bytes as a stream: `write` is called with consecutive pieces, in order, of at most
    // a window each, on every rank that passes one (an empty function: this rank wants none; its
    // parts still reach the others). No rank holds more than its own parts and a window, so a
    // model larger than any rank's memory serializes to a file or socket. An exception `write`
    // throws ends its calls on that rank; once the stream is over, every rank throws it.
    using ByteWriter = std::function<void(const void *data, std::size_t size)>;
    void serialize(const ByteWriter &write);
    // Loads bytes from serialize() (every rank passes the same bytes); as load().
    void deserialize(const void *data, std::size_t size);
    void deserialize(const std::vector<unsigned char> &bytes) { deserialize(bytes.data(), bytes.size()); }

  private:
    explicit ShardedOptimizer(std::unique_ptr<OptimizerBackend> backend);
    // The step engine (every strategy but async_sgd) or asynchronous SGD: every call forwards to it.
    std::unique_ptr<OptimizerBackend> backend_;
};

} // namespace shardopt

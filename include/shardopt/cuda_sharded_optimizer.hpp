// ShardedDeviceOptimizer: ShardedOptimizer for parameters in CUDA device memory, over a GPU
// communicator (gpu_comm.hpp: nccl, or staged through host memory over UCX).
//
// Strategies, step protocol and results are those of ShardedOptimizer (sharded_optimizer.hpp):
// DDP, ZeRO-1/2, FSDP, hybrid (data x tensor x pipeline grid, HSDP) and LocalSGD, with the
// parameters, gradients, optimizer state and staging buffers each rank holds living on its GPU.
// The update is DeviceOptimizer's fused kernels, one optimizer per bucket's owned part, so
// ZeRO's post-update parameter allgather of bucket b (on the communicator's stream) runs while
// bucket b+1 is being updated (on the compute stream).
//
// Streams: the caller computes gradients on the compute stream given to create() (nullptr: the
// legacy default stream) and the optimizer enqueues its own passes there. grad_ready(b) orders
// b's reduction after the work already on the compute stream and starts it on the
// communicator's stream at once, so it overlaps the computation of later buckets. step()
// waits for the reductions, computes the global gradient norm (one 8-byte read back per step:
// the skip and clip decisions and StepResult are host values), enqueues the update and, for
// ZeRO, the parameter allgathers; with overlap_param_gather off it returns once they are done.
// bucket_grad(b) / grad(t) clear the buffer on the compute stream: write the gradient there (or
// on a stream ordered after it). gather(b) returns once the unit's parameters are on the device
// (the host waited for the allgather), so any stream may read them.
//
// Precision: f32 parameters, gradients and state (ParameterSet dtype f32). Rules: every rule of
// OptimizerOptions; LAMB only where a tensor's update is not split across ranks (DDP,
// LocalSGD), since its per-tensor norms would need a reduction between the update's passes.
// Checkpoints are ShardedOptimizer's (save, load, serialize, deserialize; same semantics and the
// same files): a checkpoint saved by either class loads into the other, at any world size and
// strategy. They pass through host memory: parameters and optimizer state are copied to the
// host to be written, and a load stages everything on the host (validated on every rank) before
// copying it to the device. Their small collectives on host data run on the GPU communicator
// through device memory.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "shardopt/comm.hpp"
#include "shardopt/cuda_optimizer.hpp"
#include "shardopt/params.hpp"
#include "shardopt/sharded_optimizer.hpp"

namespace shardopt::device {
class DeviceEngine;
class DeviceSpace;
} // namespace shardopt::device

namespace shardopt::cuda {

class ShardedDeviceOptimizer {
  public:
    // Collective over comm (an nccl or staged communicator). `initial` (host memory, packed,
    // null for zeros) must be the same on every rank. Throws Error(unsupported) when built
    // without CUDA or without a usable device, Error(invalid_argument) for a communicator that
    // is not a GPU one, a dtype other than f32, or LAMB with sharded state.
    static std::unique_ptr<ShardedDeviceOptimizer> create(CommunicatorPtr comm, ParameterSet layout,
                                                          const OptimizerOptions &optimizer,
                                                          const ShardingOptions &options,
                                                          const void *initial = nullptr, Stream stream = nullptr);
    ~ShardedDeviceOptimizer();
    ShardedDeviceOptimizer(const ShardedDeviceOptimizer &) = delete;
    ShardedDeviceOptimizer &operator=(const ShardedDeviceOptimizer &) = delete;

    int rank() const noexcept;
    int world_size() const noexcept;
    const ParameterSet &layout() const noexcept;
    const ShardingOptions &options() const noexcept;
    std::int64_t step_count() const noexcept;
    void set_learning_rate(double lr);
    ShardedOptimizer::GridPosition grid_position() const noexcept;
    CommunicatorPtr tensor_group() const noexcept;   // null unless hybrid
    CommunicatorPtr pipeline_group() const noexcept; // null unless hybrid

    // --- parameters (device pointers) ---
    void *parameters();            // full padded buffer; not FSDP
    void *tensor_parameters(int t); // FSDP: only while t's unit is gathered
    void *gather(int bucket);      // FSDP: collective; others: the resident pointer
    void release(int bucket);
    // Host packed copies (collective for FSDP and hybrid, like ShardedOptimizer's).
    void get_parameters(void *packed_host);
    void set_parameters(const void *packed_host);

    // --- step protocol (as ShardedOptimizer; gradient pointers are device memory) ---
    void zero_grad();
    void *bucket_grad(int bucket);
    void *grad(int tensor);
    void grad_ready(int bucket);
    StepResult step();

    // Device bytes held, by kind (as ShardedOptimizer::memory_stats).
    MemoryStats memory_stats() const;

    // --- state (as ShardedOptimizer's) ---
    // Replicated parameters and state made identical on every rank (from rank 0; LocalSGD:
    // averaged); throws Error(mismatch) when ranks disagree on the step count, layout,
    // optimizer kind or learning rate.
    void synchronize_optimizer_state();
    // True on every rank when any rank votes to stop.
    bool should_early_stop(bool local_vote);
    // ShardedOptimizer::optimize: the model callback works on host memory (packed parameters
    // copied from the device each iteration, its gradient copied into the device buckets).
    OptimizeResult optimize(const ModelFunction &model, const OptimizeOptions &options);

    // --- checkpoints (all collective over the world; see ShardedOptimizer::save/load) ---
    void save(const std::string &dir, CheckpointForm form = CheckpointForm::sharded);
    // Any checkpoint of either class, any world size and strategy. Everything is read and
    // validated on every rank before the device is touched: a bad checkpoint (corrupt, io, a
    // layout or optimizer mismatch) makes every rank throw with the optimizer unchanged. A device
    // failure while the staged contents are copied in (a CUDA error, a timeout) leaves it
    // partly loaded: load again.
    void load(const std::string &dir);
    // The consolidated form in memory (host bytes); every rank gets the same bytes.
    std::vector<unsigned char> serialize();
    void deserialize(const void *data, std::size_t size);
    void deserialize(const std::vector<unsigned char> &bytes) { deserialize(bytes.data(), bytes.size()); }

    // For tests and tools: an optimizer whose memory and passes are those of `space` (see
    // src/sharding/device/device_space.hpp); create() uses the CUDA space.
    static std::unique_ptr<ShardedDeviceOptimizer> create_in(std::unique_ptr<device::DeviceSpace> space,
                                                             CommunicatorPtr comm, ParameterSet layout,
                                                             const OptimizerOptions &optimizer,
                                                             const ShardingOptions &options,
                                                             const void *initial = nullptr);

  private:
    explicit ShardedDeviceOptimizer(std::unique_ptr<device::DeviceEngine> engine);
    std::unique_ptr<device::DeviceEngine> engine_;
};

} // namespace shardopt::cuda

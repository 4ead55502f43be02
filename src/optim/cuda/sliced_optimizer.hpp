// The CUDA optimizer over slices of bigger tensors: what the step engine's CUDA space
// (src/sharding/engine/cuda_space.cpp) needs beyond DeviceOptimizer's whole tensors. A rank of a
// sharded optimizer holds a slice of a tensor, and low-bit state (src/optim/lowbit.hpp) counts its
// blocks from the whole tensor's first element and quantizes by the whole tensor's size; a block
// that a shard boundary cuts is scaled by the maximum over every rank's part, so the update runs
// in two halves with the maxima combined across ranks in between (the engine's statistics round,
// as the CPU rule's begin_step / apply).
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "shardopt/device_optimizer.hpp"

namespace shardopt::cuda::detail {

// Where an optimizer tensor lies in its whole tensor: its first element's index there, the whole
// tensor's elements (0: the slice is the whole tensor), and whether its first / last low-bit block
// is shared with other ranks (cut by a shard boundary).
struct TensorSlice {
    std::size_t offset = 0;
    std::size_t tensor_count = 0;
    bool shared_first = false, shared_last = false;
};

// Per tensor, the new maxima of its shared blocks: kTopsPerTensor floats, [end][slot] (end 0 the
// first block, 1 the last; slot 0 m or SGD's momentum, 1 Adam's v).
constexpr int kTopsPerTensor = 4;

class SlicedOptimizer : public DeviceOptimizer {
  public:
    // The first half of step(): the step's scalars and, where some low-bit block is shared, each
    // shared block's new maximum over this slice's part, read back into tops[t * kTopsPerTensor +
    // end * 2 + slot] (waits for the device; other entries are left as they were).
    virtual void begin_step(const void *const *grads, std::size_t grad_count, Stream stream, float *tops) = 0;
    // The second half: the update, each shared block scaled by max(its new maximum here, tops'
    // entry: the maximum combined across the ranks). Enqueued.
    virtual void finish_step(const float *tops, Stream stream) = 0;
    // Whether some low-bit block is shared (else begin_step reads nothing back and tops are unused).
    virtual bool shares_blocks() const noexcept = 0;
    // write_state for a slice whose first / last block is shared: first_top / last_top, the largest
    // |value| of the block's other parts (negative: none), as lowbit::encode_slice.
    virtual void write_state(int tensor, int slot, const float *host, double first_top, double last_top) = 0;
    using DeviceOptimizer::write_state;
};

// As DeviceOptimizer::create, with slices[t] for tensor t (slices.size() == params.size()).
std::unique_ptr<SlicedOptimizer> create_sliced_optimizer(const std::vector<DeviceTensor> &params,
                                                         const std::vector<TensorSlice> &slices,
                                                         const DeviceOptimizerOptions &options, Stream stream = nullptr);

} // namespace shardopt::cuda::detail

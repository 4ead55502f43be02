// The CUDA optimizer's low-bit state (lowbit.cu's tables and arrays): which tensors are quantized
// (by their whole tensor's size, TensorSlice), each one's codes and block scales per slot in one
// device buffer (lowbit.hpp's LowBitArray layout over the slice), the group tables of the update
// and of the maxima pass over shared blocks, the shared blocks' maxima, and the host side of
// read_state / write_state (decoded values, as the CPU's checkpoints hold low-bit state).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "cuda/device_buffer.hpp"
#include "launch.hpp"
#include "shardopt/optim.hpp"
#include "sliced_optimizer.hpp"

namespace shardopt::cuda::detail {

class LowbitState {
  public:
    // A bounded host <-> device copy (the optimizer's): dst, src, bytes, kind, what.
    using Copy = std::function<void(void *, const void *, std::size_t, cudaMemcpyKind, const char *)>;

    LowbitState() = default;
    // Tensor t holds counts[t] elements of slices[t]; quantized where its whole tensor is.
    LowbitState(StatePrecision precision, int slots, const std::vector<std::size_t> &counts,
                const std::vector<TensorSlice> &slices);
    bool any() const noexcept { return !entries_.empty(); }
    bool quantized(std::size_t t) const { return index_[t] >= 0; }
    bool shares() const noexcept { return !maxima_groups_.empty(); }
    int bits() const noexcept;
    // Device arrays and tables, uploaded on `stream` with every code and scale 0 (state 0).
    void create(cudaStream_t stream);
    void release() noexcept;
    // The update's launch (maxima: the maxima pass over the groups of shared blocks).
    LowbitLaunch launch(const TensorEntry *tensors, const StepScalars *scalars, uint32_t flags, DType dtype,
                        cudaStream_t stream, bool maxima) const;
    // The shared blocks' maxima, kTopsPerTensor per tensor (SlicedOptimizer::begin_step's layout).
    void read_tops(float *host, const Copy &copy) const;
    void write_tops(const float *host, const Copy &copy) const;
    // Slot `slot` of quantized tensor t as values, and back (first_top / last_top: encode_slice's).
    void read(std::size_t t, int slot, float *host, const Copy &copy) const;
    void write(std::size_t t, int slot, const float *host, double first_top, double last_top, const Copy &copy) const;

  private:
    StatePrecision precision_ = StatePrecision::full;
    int slots_ = 0;
    std::vector<std::size_t> counts_;
    std::vector<TensorSlice> slices_;
    std::vector<int> index_;            // per tensor: its row in entries_, or -1
    std::vector<LowbitEntry> entries_;  // host copy of the device table
    std::vector<Chunk> groups_, maxima_groups_;
    DeviceBuffer arrays_, tops_, table_, group_table_, maxima_table_, books_;
};

} // namespace shardopt::cuda::detail

// The error-feedback residuals of the chunk methods' reducers (flat and across hosts): what this
// rank's phase-one payloads missed, in the padded flat layout, and for an allreduce what the
// second compression of the chunk it owns missed, in the shard layout. Empty when the method
// keeps none; the pointers are then null, which the codec reads as "no feedback".
#pragma once

#include <algorithm>
#include <vector>

#include "compressed_reducer.hpp"
#include "residual_state.hpp"

namespace shardopt::compression {

template <typename T> class ChunkResiduals {
  public:
    ChunkResiduals(const ParameterSet &layout, const CompressionOptions &options, ReduceMode mode) : method_(options.method) {
        if (!options.keeps_residuals()) return;
        sent_.assign(layout.padded_count(), T(0));
        if (mode == ReduceMode::allreduce) owned_.assign(layout.shard_count(), T(0));
    }
    // At flat offset `at` (a bucket's offset plus a chunk's), or null.
    T *sent(std::size_t at) { return sent_.empty() ? nullptr : sent_.data() + at; }
    // At shard offset `at` (a bucket's shard offset), or null.
    T *owned(std::size_t at) { return owned_.empty() ? nullptr : owned_.data() + at; }

    void clear() {
        std::fill(sent_.begin(), sent_.end(), T(0));
        std::fill(owned_.begin(), owned_.end(), T(0));
    }
    std::size_t bytes() const noexcept { return (sent_.size() + owned_.size()) * sizeof(T); }
    std::vector<unsigned char> save() const { return residual_state::save(method_, {&sent_, &owned_}); }
    bool load(const std::vector<unsigned char> &bytes) { return residual_state::load(bytes, method_, {&sent_, &owned_}); }

  private:
    GradientCompression method_;
    std::vector<T> sent_, owned_;
};

} // namespace shardopt::compression

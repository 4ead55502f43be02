// ParameterSet: the layout of a model's parameters in one flat buffer.
//
// Tensors are registered by name and element count and laid out back to back. Consecutive
// tensors are grouped into buckets (at most bucket_bytes each, or closed explicitly with
// end_bucket(), which is how FSDP units are declared); a tensor is never split across buckets.
// Each bucket is padded to a multiple of the world size so it splits evenly into one shard per
// rank: rank r owns elements [r*shard, (r+1)*shard) of every bucket. Gradient reduction,
// optimizer-state sharding and FSDP gathering all work bucket by bucket on this layout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "shardopt/types.hpp"

namespace shardopt {

struct TensorLayout {
    std::string name;
    std::size_t count = 0;  // elements
    std::size_t offset = 0; // in the flat (padded) buffer
    int bucket = 0;
    bool tp_replicated = false; // hybrid: same values on every tensor-parallel rank
    std::size_t rows = 0;       // add_matrix: a rows x (count / rows) row-major matrix; 0 = no shape
};

struct BucketLayout {
    std::size_t offset = 0;       // first element in the flat buffer
    std::size_t count = 0;        // elements used by tensors
    std::size_t padded = 0;       // count rounded up to a multiple of the world size
    std::size_t shard = 0;        // padded / world size: what each rank owns
    std::size_t shard_offset = 0; // where this bucket's shard starts in a rank's shard buffer
    int first_tensor = 0;
    int tensor_count = 0;
};

class ParameterSet {
  public:
    static constexpr std::size_t kDefaultBucketBytes = 25u << 20; // PyTorch DDP's default

    explicit ParameterSet(DType dtype = DType::f32, std::size_t bucket_bytes = kDefaultBucketBytes);

    // --- registration (before plan) ---
    // Appends a tensor; returns its index. Names must be unique and counts > 0.
    int add(const std::string &name, std::size_t count, bool tp_replicated = false);
    // Appends a rows x cols matrix (row-major): the same as add(name, rows * cols), with the shape
    // kept for what needs it (PowerSGD compresses matrices only).
    int add_matrix(const std::string &name, std::size_t rows, std::size_t cols, bool tp_replicated = false);
    // Closes the current bucket: the next tensor starts a new one (an FSDP unit boundary).
    void end_bucket();
    // The bucket size of later plan() calls (> 0), the end_bucket boundaries kept.
    void set_bucket_bytes(std::size_t bucket_bytes);

    // Computes the layout for `world_size` shards. Registration is closed afterwards; planning
    // again for another world size is allowed (checkpoint resharding).
    void plan(int world_size);
    bool planned() const noexcept { return world_size_ > 0; }

    // --- layout queries (after plan) ---
    DType dtype() const noexcept { return dtype_; }
    std::size_t element_size() const noexcept { return dtype_size(dtype_); }
    std::size_t bucket_bytes() const noexcept { return bucket_bytes_; }
    int world_size() const noexcept { return world_size_; }
    int tensor_count() const noexcept { return int(tensors_.size()); }
    int bucket_count() const noexcept { return int(buckets_.size()); }
    const TensorLayout &tensor(int index) const;
    const BucketLayout &bucket(int index) const;
    const std::vector<TensorLayout> &tensors() const noexcept { return tensors_; }
    const std::vector<BucketLayout> &buckets() const noexcept { return buckets_; }
    int find(const std::string &name) const; // -1 when absent
    std::size_t element_count() const noexcept { return element_count_; } // real parameters
    std::size_t padded_count() const noexcept { return padded_count_; }   // flat buffer length
    std::size_t shard_count() const noexcept { return padded_count_ / std::size_t(world_size_); }
    std::size_t max_bucket_padded() const noexcept { return max_bucket_padded_; }
    // Layout fingerprint (names, counts, buckets, dtype): equal across ranks of one model.
    std::uint64_t fingerprint() const;

  private:
    void require_open() const;
    void require_planned() const;

    DType dtype_;
    std::size_t bucket_bytes_;
    std::vector<TensorLayout> tensors_;
    std::vector<int> forced_breaks_; // tensor indices that start a new bucket
    std::vector<BucketLayout> buckets_;
    int world_size_ = 0;
    std::size_t element_count_ = 0;
    std::size_t padded_count_ = 0;
    std::size_t max_bucket_padded_ = 0;
};

} // namespace shardopt

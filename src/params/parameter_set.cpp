#include "shardopt/params.hpp"

#include <algorithm>

#include "shardopt/error.hpp"

namespace shardopt {

ParameterSet::ParameterSet(DType dtype, std::size_t bucket_bytes) : dtype_(dtype), bucket_bytes_(bucket_bytes) {
    require(dtype == DType::f32 || dtype == DType::f64, ErrorCode::invalid_argument,
            std::string("parameter dtype must be f32 or f64, got ") + dtype_name(dtype));
    require(bucket_bytes > 0, ErrorCode::invalid_argument, "bucket_bytes must be positive");
}

void ParameterSet::require_open() const {
    require(!planned(), ErrorCode::invalid_state, "parameter set is already planned: register tensors first");
}

void ParameterSet::require_planned() const {
    require(planned(), ErrorCode::invalid_state, "parameter set is not planned yet (call plan(world_size))");
}

int ParameterSet::add(const std::string &name, std::size_t count, bool tp_replicated) {
    require_open();
    require(!name.empty(), ErrorCode::invalid_argument, "tensor name must not be empty");
    require(count > 0, ErrorCode::invalid_argument, "tensor '" + name + "' has zero elements");
    require(find(name) < 0, ErrorCode::invalid_argument, "tensor '" + name + "' registered twice");
    TensorLayout t;
    t.name = name;
    t.count = count;
    t.tp_replicated = tp_replicated;
    tensors_.push_back(std::move(t));
    return int(tensors_.size()) - 1;
}

int ParameterSet::add_matrix(const std::string &name, std::size_t rows, std::size_t cols, bool tp_replicated) {
    require(rows > 0 && cols > 0, ErrorCode::invalid_argument,
            "tensor '" + name + "': a matrix needs rows and columns > 0");
    require(rows <= SIZE_MAX / cols, ErrorCode::invalid_argument, "tensor '" + name + "': rows x cols overflows");
    const int t = add(name, rows * cols, tp_replicated);
    tensors_[std::size_t(t)].rows = rows;
    return t;
}

void ParameterSet::end_bucket() {
    require_open();
    const int next = int(tensors_.size());
    if (next > 0 && (forced_breaks_.empty() || forced_breaks_.back() != next)) forced_breaks_.push_back(next);
}

void ParameterSet::set_bucket_bytes(std::size_t bucket_bytes) {
    require(bucket_bytes > 0, ErrorCode::invalid_argument, "bucket_bytes must be positive");
    bucket_bytes_ = bucket_bytes;
}

void ParameterSet::plan(int world_size) {
    require(world_size >= 1, ErrorCode::invalid_argument, "world size must be at least 1");
    require(!tensors_.empty(), ErrorCode::invalid_state, "parameter set has no tensors");
    world_size_ = world_size;
    buckets_.clear();
    const std::size_t elem = element_size();
    const std::size_t limit = std::max<std::size_t>(1, bucket_bytes_ / elem);
    std::size_t offset = 0, shard_offset = 0;
    element_count_ = 0;
    max_bucket_padded_ = 0;
    auto close = [&](BucketLayout &b) {
        b.padded = (b.count + world_size - 1) / world_size * world_size;
        b.shard = b.padded / world_size;
        b.shard_offset = shard_offset;
        shard_offset += b.shard;
        offset = b.offset + b.padded;
        max_bucket_padded_ = std::max(max_bucket_padded_, b.padded);
        buckets_.push_back(b);
    };
    BucketLayout current;
    bool open = false;
    for (int i = 0; i < int(tensors_.size()); ++i) {
        auto &t = tensors_[i];
        const bool forced = std::find(forced_breaks_.begin(), forced_breaks_.end(), i) != forced_breaks_.end();
        if (open && (forced || current.count + t.count > limit)) {
            close(current);
            open = false;
        }
        if (!open) {
            current = BucketLayout{};
            current.offset = offset;
            current.first_tensor = i;
            open = true;
        }
        t.offset = current.offset + current.count;
        t.bucket = int(buckets_.size());
        current.count += t.count;
        current.tensor_count += 1;
        element_count_ += t.count;
    }
    close(current);
    padded_count_ = offset;
}

const TensorLayout &ParameterSet::tensor(int index) const {
    require(index >= 0 && index < tensor_count(), ErrorCode::invalid_argument,
            "tensor index " + std::to_string(index) + " out of range (" + std::to_string(tensor_count()) + " tensors)");
    return tensors_[index];
}

const BucketLayout &ParameterSet::bucket(int index) const {
    require_planned();
    require(index >= 0 && index < bucket_count(), ErrorCode::invalid_argument,
            "bucket index " + std::to_string(index) + " out of range (" + std::to_string(bucket_count()) + " buckets)");
    return buckets_[index];
}

int ParameterSet::find(const std::string &name) const {
    for (int i = 0; i < int(tensors_.size()); ++i)
        if (tensors_[i].name == name) return i;
    return -1;
}

std::uint64_t ParameterSet::fingerprint() const {
    // FNV-1a over the layout description: cheap, stable, and only compared for equality.
    std::uint64_t h = 1469598103934665603ull;
    auto mix = [&](const void *data, std::size_t n) {
        const auto *p = static_cast<const unsigned char *>(data);
        for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
    };
    const int32_t dt = int32_t(dtype_);
    mix(&dt, sizeof dt);
    for (const auto &t : tensors_) {
        mix(t.name.data(), t.name.size());
        mix(&t.count, sizeof t.count);
        mix(&t.bucket, sizeof t.bucket);
    }
    return h;
}

} // namespace shardopt

#include "shard_owner.hpp"

#include <cstring>

#include "../comm/reduction.hpp"
#include "shardopt/error.hpp"

namespace shardopt::async {

ShardOwner::ShardOwner(const ParameterSet &layout, int rank, const OptimizerOptions &optimizer, engine::Space &space)
    : layout_(layout), elem_(layout.element_size()), master_(layout.shard_count() * layout.element_size()),
      sum_(layout.shard_count() * layout.element_size()), segments_(owned_chunks(layout, rank)),
      updates_(std::size_t(layout.bucket_count())) {
    for (const auto &s : segments_) updates_[std::size_t(layout.tensor(s.tensor).bucket)].segments.push_back(s);
    for (auto &u : updates_) {
        std::vector<engine::Span> spans;
        for (const auto &s : u.segments) spans.push_back({master_.data() + s.local * elem_, s.count, s.tensor});
        u.updater = space.make_updater(spans, layout.dtype(), optimizer);
        state_slots_ = u.updater->state_slots();
    }
}

void ShardOwner::add_gradient(const unsigned char *shard) {
    const std::size_t count = layout_.shard_count();
    // The kernels of the backends' reductions: the first input as it is, each next one added.
    if (summed_ == 0) std::memcpy(sum_.data(), shard, sum_.size());
    else combine_into(sum_.data(), shard, count, layout_.dtype(), ReduceOp::sum);
    ++summed_;
}

void ShardOwner::apply() {
    require(summed_ > 0, ErrorCode::internal, "async SGD: an update without gradients");
    divide_by_count(sum_.data(), layout_.shard_count(), layout_.dtype(), summed_);
    summed_ = 0;
    for (auto &u : updates_) {
        std::vector<const void *> grads;
        for (const auto &s : u.segments) grads.push_back(sum_.data() + s.local * elem_);
        u.updater->begin_step(grads, nullptr); // element-wise rules only (LAMB is refused)
        u.updater->apply(nullptr);
    }
}

std::vector<unsigned char> ShardOwner::state_to_host(int slot) const {
    std::vector<unsigned char> host(master_.size(), 0);
    for (const auto &u : updates_)
        for (std::size_t i = 0; i < u.segments.size(); ++i)
            u.updater->read_state(int(i), slot, host.data() + u.segments[i].local * elem_);
    return host;
}

void ShardOwner::state_from_host(int slot, const unsigned char *shard) {
    for (auto &u : updates_)
        for (std::size_t i = 0; i < u.segments.size(); ++i)
            u.updater->write_state(int(i), slot, shard + u.segments[i].local * elem_, nullptr);
}

void ShardOwner::set_step_count(std::int64_t steps) {
    for (auto &u : updates_) u.updater->set_step_count(steps);
}

void ShardOwner::set_lr(double lr) {
    for (auto &u : updates_) u.updater->set_lr(lr);
}

std::size_t ShardOwner::state_bytes() const noexcept {
    std::size_t total = 0;
    for (const auto &u : updates_) total += u.updater->state_bytes();
    return total;
}

} // namespace shardopt::async

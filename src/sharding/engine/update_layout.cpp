#include "update_layout.hpp"

#include <algorithm>

#include "../../optim/lowbit.hpp"
#include "shardopt/error.hpp"

namespace shardopt::engine {

UpdateLayout::UpdateLayout(const ParameterSet &layout, const OptimizerOptions &optimizer, bool state_sharded,
                           int group_size)
    : layout_(layout), rule_(Optimizer::create(optimizer)), block_(rule_->lowbit_block()),
      phases_(rule_->stat_phases()), tensors_(std::size_t(layout.tensor_count())) {
    require(phases_ <= Segment<float>::kMaxPhases, ErrorCode::internal, "a rule with more statistics phases than spans hold");
    // Where chunk boundaries cut each tensor (offsets inside it): the blocks they fall inside are
    // held in parts by several ranks.
    std::vector<std::vector<std::size_t>> cuts(tensors_.size());
    if (state_sharded && block_ > 0)
        for (int r = 0; r < group_size; ++r)
            for (const OwnedSegment &s : owned_chunks(layout, r)) {
                const std::size_t at = s.flat - layout.tensor(s.tensor).offset;
                if (at > 0) cuts[std::size_t(s.tensor)].push_back(at);
            }
    for (std::size_t t = 0; t < tensors_.size(); ++t) {
        Tensor &info = tensors_[t];
        info.shape.count = layout.tensor(int(t)).count;
        info.shape.rows = layout.tensor(int(t)).rows;
        if (block_ > 0 && lowbit::quantizes(optimizer.state_precision, info.shape.count))
            info.shared = lowbit::shared_blocks(block_, cuts[t]);
        info.shape.shared_blocks = info.shared.size();
        // The restore buffer: the shared blocks' maxima per slot, then the tensor's own state.
        info.restore = restore_size_;
        restore_size_ += info.shared.size() * std::size_t(rule_->state_slots()) + rule_->tensor_state(info.shape);
    }
    restore_exchange_ = state_sharded && group_size > 1 && restore_size_ > 0;
    if (rule_->transforms_matrices()) { // each matrix to the rank with the least work so far
        std::vector<double> work(std::size_t(std::max(group_size, 1)), 0.0);
        for (std::size_t t = 0; t < tensors_.size(); ++t) {
            const TensorShape &shape = tensors_[t].shape;
            if (!shape.matrix()) continue;
            const int owner = int(std::min_element(work.begin(), work.end()) - work.begin());
            work[std::size_t(owner)] += double(shape.count) * double(std::min(shape.rows, shape.cols()));
            matrix_jobs_.push_back({int(t), shape.rows, shape.cols(), owner});
        }
    }
    phase_begin_.assign(std::size_t(phases_) + 1, 0);
    std::size_t at = 0;
    for (int p = 0; p < phases_; ++p) {
        phase_begin_[std::size_t(p)] = at;
        for (Tensor &info : tensors_) {
            info.stats[p] = at;
            at += rule_->phase_stats(p, info.shape);
        }
    }
    phase_begin_[std::size_t(phases_)] = at;
}

Span UpdateLayout::span(const OwnedSegment &s, unsigned char *params) const {
    const Tensor &info = tensors_.at(std::size_t(s.tensor));
    Span span;
    span.data = params;
    span.count = s.count;
    span.tensor = s.tensor;
    span.offset = s.flat - layout_.tensor(s.tensor).offset;
    span.shape = info.shape;
    for (int p = 0; p < phases_; ++p) span.stats[p] = info.stats[p];
    span.restore = info.restore;
    if (!info.shared.empty()) {
        const lowbit::SharedEnds ends = lowbit::shared_ends(block_, info.shared, span.offset, s.count, info.shape.count);
        span.shared_first = ends.first;
        span.shared_last = ends.last;
    }
    return span;
}

} // namespace shardopt::engine

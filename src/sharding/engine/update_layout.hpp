// UpdateLayout: what a rule needs to know of each span it updates beyond its memory. Where the
// span lies in its tensor and the tensor's shape (low-bit blocks count from the tensor's first
// element, so every strategy and world size quantizes the same blocks); which of the tensor's
// blocks other ranks also hold part of (their maxima are combined across the group); and where
// each tensor's statistics of each phase sit in the step's buffer. Built from the layout and the
// chunks of every rank of the group, so it is the same on every rank.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "../../params/owned_segments.hpp"
#include "shardopt/optim.hpp"
#include "space.hpp"

namespace shardopt::engine {

class UpdateLayout {
  public:
    // `state_sharded`: each rank updates its chunk of every bucket (cut across group_size ranks),
    // else every tensor whole.
    UpdateLayout(const ParameterSet &layout, const OptimizerOptions &optimizer, bool state_sharded, int group_size);

    // The span of owned segment `s` whose parameters are at `params`.
    Span span(const OwnedSegment &s, unsigned char *params) const;

    // The statistics of one step: phases() rounds, round p in elements [phase_begin(p),
    // phase_begin(p) + phase_size(p)) of a buffer of stats_size() zeros, combined across the
    // group with phase_op(p) before the next round runs.
    int phases() const noexcept { return phases_; }
    std::size_t stats_size() const noexcept { return phase_begin_.back(); }
    std::size_t phase_begin(int p) const { return phase_begin_[std::size_t(p)]; }
    std::size_t phase_size(int p) const { return phase_begin_[std::size_t(p) + 1] - phase_begin_[std::size_t(p)]; }
    ReduceOp phase_op(int p) const { return rule_->phase_op(p); }
    // Restoring state (checkpoints, synchronization) where a rank cannot restore its part alone:
    // a low-bit block split between ranks takes the maximum over every part as its scale, and
    // per-tensor state (Adafactor's factored variances, which cross checkpoints as the first
    // values of the tensor's slot 0) comes from whichever ranks hold those elements. Each span adds
    // what it holds into a buffer of restore_size() zeros at Span::restore (maxima, and values
    // that are >= 0), combined across the group with max: restore_exchange() says when it must be.
    std::size_t restore_size() const noexcept { return restore_size_; }
    bool restore_exchange() const noexcept { return restore_exchange_; }

    // Matrices the rule transforms whole each step (Muon's Newton-Schulz): each is assembled
    // from its holders' parts and transformed once, by its owner rank of the group, whose result
    // every holder takes back. Owners are spread so their work (rows x cols x min(rows, cols))
    // balances, the same on every rank.
    struct MatrixJob {
        int tensor;
        std::size_t rows, cols;
        int owner; // rank in the group
    };
    const std::vector<MatrixJob> &matrix_jobs() const noexcept { return matrix_jobs_; }
    const Optimizer &rule() const noexcept { return *rule_; }

  private:
    struct Tensor {
        TensorShape shape;
        std::vector<std::size_t> shared;               // blocks cut by a chunk boundary, ascending
        std::size_t stats[Segment<float>::kMaxPhases]; // where its statistics start, per phase
        std::size_t restore = 0;                       // where its part of the restore buffer starts
    };
    const ParameterSet &layout_;
    std::unique_ptr<Optimizer> rule_; // asked how many statistics each tensor has
    std::size_t block_;
    int phases_;
    std::vector<Tensor> tensors_;
    std::vector<std::size_t> phase_begin_; // phases_ + 1 entries
    std::size_t restore_size_ = 0;
    bool restore_exchange_ = false;
    std::vector<MatrixJob> matrix_jobs_;
};

} // namespace shardopt::engine

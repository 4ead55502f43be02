// SpaceUpdate: the update where the memory is. Each bucket's updater is the space's rule over the
// bucket's owned segments of the resident parameters; the norm sums the space's reduced gradient.
#include <cmath>
#include <vector>

#include "update.hpp"

namespace shardopt::engine {
namespace {

class SpaceUpdate final : public Update {
  public:
    SpaceUpdate(const EngineContext &ctx, ParameterStore &params, GradientBuckets &grads,
                const std::vector<OwnedSegment> &owned, int state_slots)
        : Update(ctx, owned, state_slots), params_(params), grads_(grads) {
        for (auto &u : buckets_)
            u.updater = ctx.space.make_updater(spans_of(u, [&](const OwnedSegment &s) { return params.param_at(s); }),
                                               ctx.dtype(), ctx.optimizer);
    }

    double sum_of_squares() override {
        Space &space = ctx_.space;
        std::vector<Span> spans;
        if (!ctx_.plan.reduce_grads()) { // LocalSGD: each rank steps on its own gradient
            for (const auto &u : buckets_)
                for (const auto &s : u.segments) spans.push_back({grads_.grad_at(s), s.count});
            return space.sum_of_squares(spans, ctx_.dtype());
        }
        // The chunks every rank owns, in the order ShardedOptimizer sums them, so the norm is the
        // same on every strategy and rank count.
        if (ctx_.grid.replica_rank == 0)
            for (const auto &s : ctx_.chunks) {
                if (ctx_.grid.tp_rank != 0 && ctx_.layout.tensor(s.tensor).tp_replicated) continue;
                spans.push_back({grads_.grad_at(s), s.count});
            }
        const double local = space.sum_of_squares(spans, ctx_.dtype());
        return space.allreduce_scalar(*ctx_.grid.world, local, ReduceOp::sum);
    }

    void apply(double clip) override {
        Space &space = ctx_.space;
        const bool gather = ctx_.plan.gather_after_step();
        // Phase 0, every bucket: clip, and start the update (the rule's first statistics: LAMB's
        // per-tensor sums, the maxima of low-bit blocks other ranks hold parts of).
        std::vector<double> stats(layout_.stats_size(), 0.0);
        double *at = stats.empty() ? nullptr : stats.data();
        for (BucketUpdate &u : buckets_) {
            std::vector<const void *> grads;
            for (const auto &s : u.segments) {
                if (clip != 1.0) space.scale(grads_.grad_at(s), s.count, ctx_.dtype(), clip);
                grads.push_back(grads_.grad_at(s));
            }
            u.updater->begin_step(grads, at);
        }
        transform_matrices(); // Muon: each matrix once, by its owner
        // Each round combined across the ranks that share a tensor or block, before the next.
        for (int p = 0; p < layout_.phases(); ++p) {
            combine_stats(p, stats);
            if (p + 1 < layout_.phases())
                for (BucketUpdate &u : buckets_) u.updater->continue_step(p + 1, at);
        }
        // The last phase, bucket by bucket: bucket b's allgather (communicator's stream) runs
        // while bucket b+1 is updated.
        for (int b = 0; b < ctx_.layout.bucket_count(); ++b) {
            buckets_[std::size_t(b)].updater->apply(at);
            if (gather) params_.start_bucket_gather(b);
        }
    }

    void gather_unit(int b) override { params_.gather_unit(b); }

    void account(MemoryStats &m, std::size_t params_bytes) const override {
        m.params_bytes = params_bytes;
        m.optimizer_state_bytes = state_bytes();
    }

  private:
    ParameterStore &params_;
    GradientBuckets &grads_;
};

} // namespace

std::unique_ptr<Update> make_space_update(const EngineContext &ctx, ParameterStore &params, GradientBuckets &grads,
                                          const std::vector<OwnedSegment> &owned, int state_slots) {
    return std::make_unique<SpaceUpdate>(ctx, params, grads, owned, state_slots);
}

} // namespace shardopt::engine

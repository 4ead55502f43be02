// CompressedReduction: gradient compression's reducer in place of the collectives. For LocalSGD
// it averages, compressed, each replica's change since the last averaging (its anchor: the
// parameters every rank held then), so the new parameters are the same on every rank; replicas
// that did not start from one anchor are averaged once uncompressed.
#include <algorithm>
#include <cstring>

#include "../compression/compressed_reducer.hpp"
#include "reduction.hpp"

namespace shardopt::engine {
namespace {

class CompressedReduction final : public Reduction {
  public:
    explicit CompressedReduction(const EngineContext &ctx)
        : ctx_(ctx), pending_(std::size_t(ctx.layout.bucket_count()), false) {
        const bool averages = ctx.plan.after_update == AfterUpdate::average_params;
        reducer_ = compression::make_compressed_reducer(*ctx.grid.shard, ctx.layout, ctx.options.compression,
                                                        ctx.plan.grads_sharded() ? compression::ReduceMode::reduce_scatter
                                                                                 : compression::ReduceMode::allreduce);
        if (averages) {
            anchor_ = ctx.space.allocate(ctx.layout.padded_count() * ctx.elem(), "LocalSGD compression anchor");
            delta_ = ctx.space.allocate(ctx.layout.max_bucket_padded() * ctx.elem(), "LocalSGD compression delta");
            ctx.space.zero(anchor_->data(), anchor_->bytes());
        }
    }

    void start(int b, unsigned char *bucket, unsigned char *shard_out) override {
        reducer_->start(b, bucket, ctx_.plan.grads_sharded() ? shard_out : nullptr);
        pending_[std::size_t(b)] = true;
    }

    bool test(int) override { return false; } // finished by finish(b) only, in start order

    void finish(int b) override {
        if (!pending_[std::size_t(b)]) return;
        pending_[std::size_t(b)] = false;
        reducer_->finish(b);
    }

    void average_params(unsigned char *params) override {
        Space &space = ctx_.space;
        const ParameterSet &layout = ctx_.layout;
        const std::size_t elem = ctx_.elem();
        if (anchor_synced_) {
            // What is averaged, compressed, is each replica's change since the last averaging; the
            // anchor is the same on every rank, so the new parameters are too.
            const DType dtype = ctx_.dtype();
            for (int b = 0; b < layout.bucket_count(); ++b) {
                const auto &bl = layout.bucket(b);
                unsigned char *p = params + bl.offset * elem, *anchor = anchor_->data() + bl.offset * elem;
                std::memcpy(delta_->data(), anchor, bl.padded * elem);
                space.scale(delta_->data(), bl.padded, dtype, -1.0);
                space.add_into(delta_->data(), p, bl.padded, dtype); // delta = params - anchor
                reducer_->start(b, delta_->data(), nullptr);
                reducer_->finish(b);
                std::memcpy(p, anchor, bl.padded * elem);
                space.add_into(p, delta_->data(), bl.padded, dtype);
                std::memcpy(anchor, p, bl.padded * elem);
            }
            return;
        }
        space.before_collective(*ctx_.grid.shard);
        ctx_.grid.shard->allreduce(params, params, layout.padded_count(), ctx_.dtype(), ReduceOp::avg);
        std::memcpy(anchor_->data(), params, anchor_->bytes());
        anchor_synced_ = true;
    }

    void params_set(const unsigned char *host, std::size_t bytes) override {
        if (!anchor_) return;
        ctx_.space.copy_from_host(anchor_->data(), host, bytes);
        anchor_synced_ = true; // set_parameters' values are the same on every rank
    }

    void skipped_step() override { reducer_->clear_residuals(); } // they hold the non-finite values too

    // [u64 n][the reducer's n bytes][u64 anchor held][anchor bytes].
    std::vector<unsigned char> rank_state() override {
        const std::vector<unsigned char> reducer = reducer_->save_state();
        const std::uint64_t n = reducer.size(), anchored = anchor_ && anchor_synced_ ? 1 : 0;
        std::vector<unsigned char> out(16 + reducer.size() + (anchored ? anchor_->bytes() : 0));
        std::memcpy(out.data(), &n, 8);
        std::copy(reducer.begin(), reducer.end(), out.begin() + 8);
        std::memcpy(out.data() + 8 + n, &anchored, 8);
        if (anchored) std::memcpy(out.data() + 16 + n, anchor_->data(), anchor_->bytes());
        return out;
    }

    void restore_rank_state(const std::vector<unsigned char> *bytes) override {
        anchor_synced_ = false; // LocalSGD replicas may differ: unless restored, the next averaging is a plain one
        // A state saved under other options (method, layout, world) does not fit: training resumes
        // with empty residuals, as it starts.
        std::uint64_t n = 0, anchored = 0;
        bool restored = false;
        if (bytes && bytes->size() >= 16) {
            std::memcpy(&n, bytes->data(), 8);
            if (n <= bytes->size() - 16) {
                std::memcpy(&anchored, bytes->data() + 8 + n, 8);
                const std::size_t anchor_bytes = anchored ? (anchor_ ? anchor_->bytes() : SIZE_MAX) : 0;
                if (anchored <= 1 && bytes->size() == 16 + n + anchor_bytes)
                    restored = reducer_->load_state(
                        std::vector<unsigned char>(bytes->begin() + 8, bytes->begin() + 8 + long(n)));
                if (restored && anchored) {
                    std::memcpy(anchor_->data(), bytes->data() + 16 + n, anchor_bytes);
                    anchor_synced_ = true;
                }
            }
        }
        if (!restored) reducer_->clear_residuals();
    }

    std::size_t state_bytes() const noexcept override {
        std::size_t total = reducer_->state_bytes();
        for (const auto *b : {&anchor_, &delta_})
            if (*b) total += (*b)->bytes();
        return total;
    }
    std::uint64_t bytes_sent() const noexcept override { return reducer_->bytes_sent(); }
    void abandon() noexcept override { reducer_->abandon(); }

  private:
    const EngineContext &ctx_;
    std::unique_ptr<compression::CompressedReducer> reducer_;
    std::vector<bool> pending_; // per bucket: started, not yet finished
    // LocalSGD: the parameters of the last averaging, and a bucket of scratch.
    SpaceBufferPtr anchor_, delta_;
    bool anchor_synced_ = false; // anchor_ holds parameters every rank shares
};

} // namespace

std::unique_ptr<Reduction> make_compressed_reduction(const EngineContext &ctx) {
    return std::make_unique<CompressedReduction>(ctx);
}

} // namespace shardopt::engine

#include "reduction.hpp"

#include <string>

#include "../../comm/finish_quietly.hpp"
#include "shardopt/error.hpp"

namespace shardopt::engine {
namespace {

class CollectiveReduction final : public Reduction {
  public:
    explicit CollectiveReduction(const EngineContext &ctx)
        : ctx_(ctx), works_(std::size_t(ctx.layout.bucket_count())) {}

    void start(int b, unsigned char *bucket, unsigned char *shard_out) override {
        const auto &bl = ctx_.layout.bucket(b);
        Communicator &group = *ctx_.grid.shard;
        WorkPtr &work = works_[std::size_t(b)];
        if (ctx_.plan.grads_sharded())
            work = group.reduce_scatter_async(bucket, shard_out, bl.shard, ctx_.dtype(), ReduceOp::avg);
        else
            work = group.allreduce_async(bucket, bucket, bl.padded, ctx_.dtype(), ReduceOp::avg);
    }

    bool test(int b) override {
        const WorkPtr &work = works_[std::size_t(b)];
        return work && work->test();
    }

    void finish(int b) override {
        if (WorkPtr work = std::move(works_[std::size_t(b)])) work->wait();
    }

    void average_params(unsigned char *params) override {
        ctx_.space.before_collective(*ctx_.grid.shard);
        ctx_.grid.shard->allreduce(params, params, ctx_.layout.padded_count(), ctx_.dtype(), ReduceOp::avg);
    }

    void abandon() noexcept override {
        for (WorkPtr &work : works_) finish_quietly(work);
    }

  private:
    const EngineContext &ctx_;
    std::vector<WorkPtr> works_; // per bucket, while its reduction is in flight
};

} // namespace

std::unique_ptr<Reduction> make_reduction(const EngineContext &ctx) {
    const CompressionOptions &compression = ctx.options.compression;
    if (!compression.enabled()) return std::make_unique<CollectiveReduction>(ctx);
    require(ctx.space.host_accessible(), ErrorCode::unsupported,
            std::string("gradient compression (") + compression_name(compression.method) +
                ") runs on host memory; an optimizer in " + ctx.space.name() + " memory reduces uncompressed");
    return make_compressed_reduction(ctx);
}

} // namespace shardopt::engine

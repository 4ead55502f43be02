#include "gradient_buckets.hpp"

#include <algorithm>
#include <string>

#include "shardopt/error.hpp"

namespace shardopt::engine {

GradientBuckets::GradientBuckets(const EngineContext &ctx, std::function<void()> note_buffers)
    : ctx_(ctx), note_buffers_(std::move(note_buffers)) {
    const ParameterSet &layout = ctx.layout;
    const std::size_t elem = ctx.elem();
    if (!ctx.offload.gradients)
        grads_ = ctx.space.allocate((ctx.plan.grads_sharded() ? layout.shard_count() : layout.padded_count()) * elem,
                                    "gradients");
    if (ctx.options.gradient_accumulation_steps > 1)
        accumulation_ = ctx.space.allocate(layout.padded_count() * elem, "gradient accumulation buffer");
    if (staged()) staging_.resize(std::size_t(std::max(1, ctx.options.staging_buffers)));
    buckets_.resize(std::size_t(layout.bucket_count()));
}

bool GradientBuckets::final_micro_step() const {
    return micro_step_ + 1 >= ctx_.options.gradient_accumulation_steps;
}

void GradientBuckets::zero_grad() {
    // Reductions in flight read the buffers about to be reused: finish them first.
    for (int b : reduce_order_) reduction_->finish(b);
    reduce_order_.clear();
    for (auto &bucket : buckets_) bucket = Bucket{};
    for (auto &s : staging_) s.bucket = -1;
    listener_->backward_started();
}

std::size_t GradientBuckets::staging_bytes() const {
    return staging_buffer_bytes(ctx_.offload, ctx_.plan, ctx_.layout);
}

std::size_t GradientBuckets::buffer_bytes() const {
    std::size_t total = accumulation_ ? accumulation_->bytes() : 0;
    for (const auto &s : staging_) total += s.buffer ? s.buffer->bytes() : 0;
    return total;
}

void GradientBuckets::release_staging(Bucket &bucket) {
    if (bucket.staging_index < 0) return;
    staging_[std::size_t(bucket.staging_index)].bucket = -1;
    bucket.staging_index = -1;
}

int GradientBuckets::take_staging(int b) {
    for (int i = 0; i < int(staging_.size()); ++i)
        if (staging_[std::size_t(i)].bucket < 0) return i;
    for (int issued : reduce_order_) { // recycle the buffer whose reduction was issued first
        Bucket &bucket = buckets_[std::size_t(issued)];
        if (bucket.staging_index >= 0) { // reducing, or (ZeRO-Offload's poll) reduced already
            if (bucket.phase == Phase::reducing) complete(issued);
            const int index = bucket.staging_index;
            release_staging(bucket);
            return index;
        }
    }
    std::string open;
    for (const auto &s : staging_) open += (open.empty() ? "" : ", ") + std::to_string(s.bucket);
    throw Error(ErrorCode::invalid_state,
                "cannot open bucket " + std::to_string(b) + ": all " + std::to_string(staging_.size()) +
                    " gradient staging buffers hold buckets not yet marked ready (" + open +
                    "); call grad_ready on one first, or raise staging_buffers");
}

unsigned char *GradientBuckets::open(int b) {
    const auto &bl = ctx_.layout.bucket(b);
    const std::size_t elem = ctx_.elem();
    Bucket &bucket = buckets_[std::size_t(b)];
    if (bucket.phase == Phase::reducing || bucket.phase == Phase::done)
        throw Error(ErrorCode::invalid_state,
                    "bucket " + std::to_string(b) +
                        " was already marked ready in this micro-step; call zero_grad() to start the next one");
    if (!staged()) {
        unsigned char *region = grads_->data() + bl.offset * elem;
        if (bucket.phase == Phase::idle) ctx_.space.zero(region, bl.padded * elem);
        bucket.phase = Phase::open;
        return region;
    }
    if (bucket.phase == Phase::idle) {
        const int index = take_staging(b);
        Staging &s = staging_[std::size_t(index)];
        if (!s.buffer) s.buffer = ctx_.space.allocate(staging_bytes(), "gradient staging buffer");
        listener_->staging_reused(index); // a reduced gradient may still be being copied out of it
        ctx_.space.zero(s.buffer->data(), bl.padded * elem);
        s.bucket = b;
        bucket.staging_index = index;
        bucket.phase = Phase::open;
        note_buffers_();
    }
    return staging_[std::size_t(bucket.staging_index)].buffer->data();
}

void *GradientBuckets::bucket_grad(int b) {
    ctx_.layout.bucket(b); // range check
    return open(b);
}

void *GradientBuckets::grad(int t) {
    const auto &tl = ctx_.layout.tensor(t);
    return open(tl.bucket) + (tl.offset - ctx_.layout.bucket(tl.bucket).offset) * ctx_.elem();
}

void GradientBuckets::grad_ready(int b) {
    const ParameterSet &layout = ctx_.layout;
    const auto &bl = layout.bucket(b);
    const std::size_t elem = ctx_.elem();
    Bucket &bucket = buckets_[std::size_t(b)];
    if (bucket.phase == Phase::reducing || bucket.phase == Phase::done)
        throw Error(ErrorCode::invalid_state, "grad_ready(" + std::to_string(b) + ") called twice in one micro-step");
    unsigned char *buffer = open(b); // a bucket never opened contributes zeros
    const DType dtype = ctx_.dtype();
    Space &space = ctx_.space;
    const int accumulate_steps = ctx_.options.gradient_accumulation_steps;
    if (!final_micro_step()) {
        space.add_into(accumulation_->data() + bl.offset * elem, buffer, bl.padded, dtype);
        bucket.phase = Phase::done;
        release_staging(bucket);
        return;
    }
    if (accumulate_steps > 1) {
        space.add_into(buffer, accumulation_->data() + bl.offset * elem, bl.padded, dtype);
        space.scale(buffer, bl.padded, dtype, 1.0 / accumulate_steps);
    }
    const CommunicatorPtr &tensor = ctx_.grid.tensor;
    if (tensor && tensor->size() > 1) { // tensor-parallel replicated tensors: averaged
        for (int t = bl.first_tensor; t < bl.first_tensor + bl.tensor_count; ++t) {
            const auto &tl = layout.tensor(t);
            if (!tl.tp_replicated) continue;
            unsigned char *g = buffer + (tl.offset - bl.offset) * elem;
            space.before_collective(*tensor);
            tensor->allreduce(g, g, tl.count, dtype, ReduceOp::avg);
        }
    }
    launch_reduction(b, buffer);
    listener_->reductions_started();
}

void GradientBuckets::launch_reduction(int b, unsigned char *buffer) {
    const auto &bl = ctx_.layout.bucket(b);
    Bucket &bucket = buckets_[std::size_t(b)];
    if (!ctx_.plan.reduce_grads()) {
        bucket.phase = Phase::done;
        return;
    }
    ctx_.space.before_collective(*ctx_.grid.shard); // after the caller's kernels that wrote the gradients
    unsigned char *shard_out = nullptr;
    // Offloaded, the shard lands in the staging buffer's output part and goes to the host from there.
    if (ctx_.plan.grads_sharded())
        shard_out = ctx_.offload.gradients ? buffer + ctx_.layout.max_bucket_padded() * ctx_.elem()
                                           : grads_->data() + bl.shard_offset * ctx_.elem();
    reduction_->start(b, buffer, shard_out);
    bucket.phase = Phase::reducing;
    reduce_order_.push_back(b);
}

void GradientBuckets::mark_remaining_ready() {
    for (int b = 0; b < int(buckets_.size()); ++b) {
        const Phase phase = buckets_[std::size_t(b)].phase;
        if (phase == Phase::idle || phase == Phase::open) grad_ready(b);
    }
}

void GradientBuckets::complete(int b) {
    reduction_->finish(b);
    buckets_[std::size_t(b)].phase = Phase::done;
    listener_->reduction_complete(b);
}

void GradientBuckets::poll_reductions() {
    for (int b : reduce_order_) {
        if (buckets_[std::size_t(b)].phase != Phase::reducing) continue;
        // Collectives complete in issue order: the first one still running ends the poll.
        if (!reduction_->test(b)) return;
        complete(b);
    }
}

void GradientBuckets::wait_reductions() {
    for (int b : reduce_order_) {
        Bucket &bucket = buckets_[std::size_t(b)];
        if (bucket.phase == Phase::reducing) complete(b);
        release_staging(bucket);
    }
    reduce_order_.clear();
    const CommunicatorPtr &replica = ctx_.grid.replica;
    if (replica && ctx_.plan.reduce_grads()) { // HSDP: shards averaged across the replica groups
        ctx_.space.before_collective(*replica);
        replica->allreduce(grads_->data(), grads_->data(), grads_->bytes() / ctx_.elem(), ctx_.dtype(), ReduceOp::avg);
    }
}

void GradientBuckets::end_accumulation() {
    micro_step_ = 0;
    if (accumulation_) ctx_.space.zero(accumulation_->data(), accumulation_->bytes());
}

unsigned char *GradientBuckets::grad_at(const OwnedSegment &s) const {
    return grads_->data() + (ctx_.plan.grads_sharded() ? s.local : s.flat) * ctx_.elem();
}

const unsigned char *GradientBuckets::reduced_owned_region(int b) const {
    const auto &bl = ctx_.layout.bucket(b);
    const std::size_t elem = ctx_.elem();
    const std::size_t chunk = ctx_.plan.state_sharded() ? std::size_t(ctx_.group_rank()) * bl.shard : 0; // in the bucket
    if (ctx_.offload.gradients) { // in b's staging buffer: the reduce-scatter's output part, or the allreduced bucket
        const int index = buckets_[std::size_t(b)].staging_index;
        require(index >= 0, ErrorCode::invalid_state,
                "offload: bucket " + std::to_string(b) + "'s reduced gradient has no staging buffer");
        const unsigned char *staging = staging_[std::size_t(index)].buffer->data();
        return ctx_.plan.grads_sharded() ? staging + ctx_.layout.max_bucket_padded() * elem : staging + chunk * elem;
    }
    if (ctx_.plan.grads_sharded()) return grads_->data() + ctx_.layout.bucket(b).shard_offset * elem;
    return grads_->data() + (bl.offset + chunk) * elem;
}

} // namespace shardopt::engine

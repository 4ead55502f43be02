// GradientBuckets: the gradient side of the step protocol. Buckets are opened (zeroed) as the
// caller writes them, summed into the accumulation buffer on micro-steps of gradient
// accumulation, and on the final micro-step scaled, averaged over the tensor-parallel group where
// replicated, and handed to the Reduction as they are marked ready. Where gradients are sharded
// (or offloaded) a bucket is written into one of a few staging buffers, recycled in the order
// their reductions were issued; the reduced shards land in the gradient buffer (or, offloaded,
// stay in the staging buffer until copied to the host).
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "engine_context.hpp"
#include "reduction.hpp"

namespace shardopt::engine {

// What the update path learns of the buckets (ZeRO-Offload copies each reduced gradient to the
// host as soon as its reduction completes).
class BucketListener {
  public:
    virtual ~BucketListener() = default;
    virtual void backward_started() {}        // zero_grad: a new micro-step's gradients
    virtual void reductions_started() {}      // grad_ready started a bucket's reduction
    virtual void reduction_complete(int b) { (void)b; }
    virtual void staging_reused(int index) { (void)index; } // staging buffer `index` is about to be written
};

class GradientBuckets {
  public:
    // `note_buffers`: called after a staging buffer is allocated (the engine's peak of buffers).
    GradientBuckets(const EngineContext &ctx, std::function<void()> note_buffers);
    // What reduces the ready buckets, and what follows them (made after the buckets): before the
    // first zero_grad.
    void connect(Reduction &reduction, BucketListener &listener) {
        reduction_ = &reduction;
        listener_ = &listener;
    }

    // --- the step protocol ---
    void zero_grad();
    void *bucket_grad(int b);
    void *grad(int t);
    void grad_ready(int b);
    // step(): every bucket not marked ready yet is (a bucket never opened contributes zeros).
    void mark_remaining_ready();
    bool final_micro_step() const;
    void next_micro_step() { ++micro_step_; }
    int micro_step() const noexcept { return micro_step_; }
    // Every reduction issued completed (in issue order), then HSDP's average across replicas.
    void wait_reductions();
    // The update took the gradients: the next step accumulates from zero.
    void end_accumulation();
    // Completes the reductions already finished, in issue order, without waiting.
    void poll_reductions();

    // --- where the reduced gradients are ---
    // Segment s of the reduced gradient (the gradient buffer: full, or the shard).
    unsigned char *grad_at(const OwnedSegment &s) const;
    // Bucket b's reduced owned region (the rank's chunk where state is sharded, else the bucket):
    // in the gradient buffer, or in b's staging buffer when gradients are offloaded.
    const unsigned char *reduced_owned_region(int b) const;
    // The staging buffer holding bucket b (-1: none).
    int staging_index(int b) const { return buckets_[std::size_t(b)].staging_index; }

    std::size_t grads_bytes() const noexcept { return grads_ ? grads_->bytes() : 0; }
    std::size_t buffer_bytes() const; // accumulation and staging buffers

  private:
    enum class Phase { idle, open, reducing, done };
    struct Bucket {
        Phase phase = Phase::idle;
        int staging_index = -1;
    };
    struct Staging {
        SpaceBufferPtr buffer;
        int bucket = -1;
    };

    // Gradients go through bucket staging buffers (ZeRO-2, FSDP; any strategy whose reduced
    // gradients are offloaded).
    bool staged() const noexcept { return ctx_.plan.grads_sharded() || ctx_.offload.gradients; }
    std::size_t staging_bytes() const;
    int take_staging(int b);
    unsigned char *open(int b);
    void launch_reduction(int b, unsigned char *buffer);
    // Bucket b's reduction in flight has finished: waits for it and tells the listener.
    void complete(int b);
    void release_staging(Bucket &bucket);

    const EngineContext &ctx_;
    std::function<void()> note_buffers_;
    Reduction *reduction_ = nullptr;
    BucketListener *listener_ = nullptr;
    SpaceBufferPtr grads_; // full padded buffer, or the shard (ZeRO-2, FSDP); none when offloaded
    SpaceBufferPtr accumulation_;
    std::vector<Staging> staging_;
    std::vector<Bucket> buckets_;
    std::vector<int> reduce_order_; // buckets whose reduction was issued this micro-step, in order
    int micro_step_ = 0;
};

} // namespace shardopt::engine

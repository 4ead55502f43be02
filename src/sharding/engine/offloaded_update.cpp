// OffloadedUpdate: ZeRO-Offload in the step engine. The update of a device optimizer runs on the
// CPU over host copies of the rank's owned regions, and the data moves as OffloadSchedule
// (../offload/) says, through the space's copy lanes (offload_lanes.hpp).
//
// Host buffers are laid out as the owned regions (owned_region): the full padded buffer for DDP,
// the rank's shard buffer where state is sharded, so each bucket crosses the bus as one
// contiguous copy in each direction. The master weights are the host copy of the owned region of
// the parameters (for FSDP with cpu_offload_params, the resident shard itself); every path that
// replaces the device's parameters refreshes them (after_params_replaced).
#include <algorithm>
#include <cstring>
#include <string>

#include "../../optim/vector_ops.hpp"
#include "../offload/offload_schedule.hpp"
#include "shardopt/error.hpp"
#include "update.hpp"

namespace shardopt::engine {
namespace {

class OffloadedUpdate final : public Update {
  public:
    OffloadedUpdate(const EngineContext &ctx, ParameterStore &params, GradientBuckets &grads,
                    const std::vector<OwnedSegment> &owned, int state_slots)
        : Update(ctx, owned, state_slots), params_(params), grads_(grads), lanes_(*ctx.space.offload_lanes()) {
        const ParameterSet &layout = ctx.layout;
        std::size_t owned_elements = 0;
        for (const auto &s : owned) owned_elements += s.count;
        const OffloadResidency r = OffloadResidency::of(ctx.offload, ctx.plan, layout, owned_elements, state_slots);
        // (What goes to host memory was checked up front by the engine: its memory plan's host side.)
        host_grads_ = lanes_.allocate_pinned(r.host_grads, "reduced gradients (cpu_offload_optimizer)");
        if (r.host_master > 0)
            host_master_ = lanes_.allocate_pinned(r.host_master, "fp32 master weights (cpu_offload_optimizer)");

        OffloadSchedule::Config config;
        config.buckets = layout.bucket_count();
        // The schedule has one round of statistics between begin_update and finish_update (LAMB's).
        require(layout_.matrix_jobs().empty(), ErrorCode::unsupported,
                std::string("ZeRO-Offload does not run rules that transform whole matrices (") +
                    optimizer_kind_name(ctx.optimizer.kind) + ")");
        require(layout_.phases() <= 1, ErrorCode::unsupported,
                std::string("ZeRO-Offload runs rules with at most one round of statistics; ") +
                    optimizer_kind_name(ctx.optimizer.kind) + " has " + std::to_string(layout_.phases()));
        for (auto &u : buckets_) {
            u.updater = lanes_.make_host_updater(spans_of(u, [&](const OwnedSegment &s) { return master_at(s); }),
                                                 ctx.dtype(), ctx.optimizer);
            config.owns.push_back(!u.segments.empty());
        }
        config.params_stay_on_host = ctx.offload.params;
        config.gather_after_update = ctx.plan.gather_after_step();
        config.update_stats = layout_.stats_size() > 0 && ctx.plan.state_sharded() && ctx.group_size() > 1;
        schedule_ = std::make_unique<OffloadSchedule>(std::move(config));
        grads_copied_.assign(std::size_t(layout.bucket_count()), CopyMark{});
        params_copied_.assign(std::size_t(layout.bucket_count()), CopyMark{});
        staging_read_.assign(std::size_t(std::max(1, ctx.options.staging_buffers)), CopyMark{});
    }

    // --- following the buckets ---
    void backward_started() override { schedule_->begin_backward(); }
    // Reductions finished by now, in issue order, without waiting (during the backward).
    void reductions_started() override { grads_.poll_reductions(); }
    void reduction_complete(int b) override { run(schedule_->reduction_complete(b)); }
    void staging_reused(int index) override {
        CopyMark &read = staging_read_[std::size_t(index)];
        if (read.empty()) return;
        lanes_.compute_waits(read); // the reduced gradient still being copied to the host out of it
        read = CopyMark{};
    }

    double sum_of_squares() override {
        double local = 0.0;
        run(schedule_->gradients_on_host(), 1.0, nullptr, &local);
        return ctx_.space.allreduce_scalar(*ctx_.grid.world, local, ReduceOp::sum);
    }

    void apply(double clip) override {
        std::vector<double> stats(layout_.stats_size(), 0.0);
        run(schedule_->update(), clip, &stats);
    }

    void gather_unit(int b) override { run(schedule_->gather(b)); } // the shard may have to come from the host first

    void before_params_replaced() override { run(schedule_->replace_parameters()); }

    // The master weights again from the device's parameters (after they were replaced there).
    void after_params_replaced() override {
        if (!host_master_) return;
        const std::size_t elem = ctx_.elem();
        for (int b = 0; b < ctx_.layout.bucket_count(); ++b) {
            const OwnedRegion r = owned_region(ctx_.plan, ctx_.layout, b);
            ctx_.space.copy_to_host(host_master_->data() + r.host_offset * elem, params_.owned_params(b), r.count * elem);
        }
    }

    void account(MemoryStats &m, std::size_t params_bytes) const override { // what went to the host, and what remains
        (ctx_.offload.params ? m.host_params_bytes : m.params_bytes) = params_bytes;
        m.host_grads_bytes = host_grads_->bytes();
        m.host_optimizer_state_bytes = state_bytes() + (host_master_ ? host_master_->bytes() : 0);
    }

    void finish_copies() noexcept override {
        for (const auto *marks : {&grads_copied_, &params_copied_})
            for (const CopyMark &mark : *marks) {
                try {
                    lanes_.wait(mark);
                } catch (...) { // a failed device: nothing left to wait for
                }
            }
    }

  private:
    // Host address of segment s in the host buffers (laid out as owned_region says).
    unsigned char *host_at(const SpaceBufferPtr &buffer, const OwnedSegment &s) const {
        return buffer->data() + (ctx_.plan.state_sharded() ? s.local : s.flat) * ctx_.elem();
    }
    // The master weights of segment s: the host shard at rest itself with cpu_offload_params.
    unsigned char *master_at(const OwnedSegment &s) const {
        if (ctx_.offload.params) return params_.data() + (ctx_.plan.state_sharded() ? s.local : s.flat) * ctx_.elem();
        return host_at(host_master_, s);
    }

    // Runs the schedule's ops. `clip`: begin_update's gradient scale; `stats`: LAMB's statistics;
    // norm_on_host's sum of squares goes to *sumsq.
    void run(const std::vector<OffloadOp> &ops, double clip = 1.0, std::vector<double> *stats = nullptr,
             double *sumsq = nullptr) {
        const ParameterSet &layout = ctx_.layout;
        const DType dtype = ctx_.dtype();
        const std::size_t elem = ctx_.elem();
        double *stats_data = stats && !stats->empty() ? stats->data() : nullptr;
        for (const OffloadOp &op : ops) {
            const int b = op.bucket;
            switch (op.kind) {
            case OffloadOp::Kind::copy_grads_to_host: {
                const OwnedRegion r = owned_region(ctx_.plan, layout, b);
                const CopyMark copied = lanes_.copy_to_host_async(host_grads_->data() + r.host_offset * elem,
                                                                  grads_.reduced_owned_region(b), r.count * elem);
                grads_copied_[std::size_t(b)] = copied;
                if (ctx_.offload.gradients) staging_read_[std::size_t(grads_.staging_index(b))] = copied;
                break;
            }
            case OffloadOp::Kind::wait_grads_on_host: lanes_.wait(grads_copied_[std::size_t(b)]); break;
            case OffloadOp::Kind::norm_on_host: {
                // The chunks SpaceUpdate sums on the device, in its order.
                std::vector<Span> spans;
                for (const auto &s : ctx_.chunks) {
                    if (ctx_.grid.tp_rank != 0 && layout.tensor(s.tensor).tp_replicated) continue;
                    spans.push_back({host_at(host_grads_, s), s.count, s.tensor});
                }
                require(sumsq != nullptr, ErrorCode::invalid_state, "offload: the norm has nowhere to go");
                *sumsq = lanes_.host_sum_of_squares(spans, dtype);
                break;
            }
            case OffloadOp::Kind::wait_params_copy: lanes_.wait(params_copied_[std::size_t(b)]); break;
            case OffloadOp::Kind::begin_update: {
                BucketUpdate &u = buckets_[std::size_t(b)];
                std::vector<const void *> grads;
                for (const auto &s : u.segments) {
                    unsigned char *g = host_at(host_grads_, s);
                    if (clip != 1.0) shardopt::scale(g, s.count, dtype, clip); // as the device's pass rounds it
                    grads.push_back(g);
                }
                u.updater->begin_step(grads, stats_data);
                break;
            }
            case OffloadOp::Kind::sum_update_stats:
                if (stats_data) combine_stats(0, *stats);
                break;
            case OffloadOp::Kind::finish_update: buckets_[std::size_t(b)].updater->apply(stats_data); break;
            case OffloadOp::Kind::copy_params_to_device: {
                const OwnedRegion r = owned_region(ctx_.plan, layout, b);
                params_copied_[std::size_t(b)] = lanes_.copy_to_device_async(
                    params_.owned_params(b), host_master_->data() + r.host_offset * elem, r.count * elem);
                break;
            }
            case OffloadOp::Kind::device_waits_params: lanes_.compute_waits(params_copied_[std::size_t(b)]); break;
            case OffloadOp::Kind::copy_shard_to_device: {
                const auto &bl = layout.bucket(b);
                params_copied_[std::size_t(b)] = lanes_.copy_to_device_async(
                    params_.unit_buffer(b) + std::size_t(ctx_.group_rank()) * bl.shard * elem,
                    params_.data() + bl.shard_offset * elem, bl.shard * elem);
                break;
            }
            case OffloadOp::Kind::gather_params:
                if (ctx_.plan.params_sharded()) params_.gather_unit(b); // FSDP: the unit the caller asked for
                else params_.start_bucket_gather(b); // ZeRO-1/2: the other ranks' chunks of the bucket
                break;
            }
        }
    }

    ParameterStore &params_;
    GradientBuckets &grads_;
    OffloadLanes &lanes_;
    std::unique_ptr<OffloadSchedule> schedule_;
    // Reduced gradients and master weights of the owned regions (owned_region's layout).
    SpaceBufferPtr host_grads_, host_master_;
    // The last copy of each bucket's data in each direction, and out of each staging buffer.
    std::vector<CopyMark> grads_copied_, params_copied_, staging_read_;
};

} // namespace

std::unique_ptr<Update> make_offloaded_update(const EngineContext &ctx, ParameterStore &params, GradientBuckets &grads,
                                              const std::vector<OwnedSegment> &owned, int state_slots) {
    return std::make_unique<OffloadedUpdate>(ctx, params, grads, owned, state_slots);
}

} // namespace shardopt::engine

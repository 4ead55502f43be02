// ZeRO-Offload in the step engine: the update of a device optimizer runs on the CPU over host
// copies of the rank's owned regions, and the data moves as OffloadSchedule (../offload/) says,
// through the space's copy lanes (offload_lanes.hpp).
//
// Host buffers are laid out as the owned regions (owned_region): the full padded buffer for DDP,
// the rank's shard buffer where state is sharded, so each bucket crosses the bus as one
// contiguous copy in each direction. The master weights are the host copy of the owned region of
// the parameters (for FSDP with cpu_offload_params, the resident shard itself); every path that
// replaces the device's parameters refreshes them (write_params, refresh_master).
#include <algorithm>
#include <cstring>
#include <string>

#include "../memory_plan.hpp"
#include "../../optim/vector_ops.hpp"
#include "shardopt/error.hpp"
#include "step_engine.hpp"

namespace shardopt::engine {

void StepEngine::set_up_offload(const std::vector<OwnedSegment> &owned) {
    std::size_t owned_elements = 0;
    for (const auto &s : owned) owned_elements += s.count;
    const OffloadResidency r = OffloadResidency::of(offload_, plan_, layout_, owned_elements, state_slots_);
    // What goes to host memory is refused up front when it cannot fit, as host memory is.
    MemoryPlan host;
    host.params = r.host_params;
    host.grads = r.host_grads;
    host.state = r.host_master + r.host_state;
    require_fits(host, ranks_sharing_memory(*comm_), data_strategy_of(options_), layout_.element_count(),
                 optimizer_kind_name(optimizer_.kind));
    host_grads_ = lanes_->allocate_pinned(r.host_grads, "reduced gradients (cpu_offload_optimizer)");
    if (r.host_master > 0)
        host_master_ = lanes_->allocate_pinned(r.host_master, "fp32 master weights (cpu_offload_optimizer)");
    const SpaceBufferPtr &master = offload_.params ? params_ : host_master_;

    OffloadSchedule::Config config;
    config.buckets = layout_.bucket_count();
    for (auto &u : updates_) {
        std::vector<Span> spans;
        for (const auto &s : u.segments) spans.push_back({host_at(master, s), s.count, s.tensor});
        u.updater = lanes_->make_host_updater(spans, layout_.dtype(), optimizer_);
        config.owns.push_back(!u.segments.empty());
    }
    config.params_stay_on_host = offload_.params;
    config.gather_after_update = plan_.gather_after_step();
    config.update_stats = !updates_.empty() && updates_.front().updater->tensor_stats() > 0 && plan_.state_sharded() &&
                          group_size_ > 1;
    schedule_ = std::make_unique<OffloadSchedule>(std::move(config));
    grads_copied_.assign(std::size_t(layout_.bucket_count()), CopyMark{});
    params_copied_.assign(std::size_t(layout_.bucket_count()), CopyMark{});
}

unsigned char *StepEngine::host_at(const SpaceBufferPtr &buffer, const OwnedSegment &s) const {
    return buffer->data() + (plan_.state_sharded() ? s.local : s.flat) * elem_;
}

const unsigned char *StepEngine::reduced_owned_region(int b) const {
    const auto &bl = layout_.bucket(b);
    const std::size_t chunk = plan_.state_sharded() ? std::size_t(group_rank_) * bl.shard : 0; // in the bucket
    if (offload_.gradients) { // in b's staging buffer: the reduce-scatter's output part, or the allreduced bucket
        const int index = buckets_[std::size_t(b)].staging_index;
        require(index >= 0, ErrorCode::invalid_state,
                "offload: bucket " + std::to_string(b) + "'s reduced gradient has no staging buffer");
        const unsigned char *staging = staging_[std::size_t(index)].buffer->data();
        return plan_.grads_sharded() ? staging + layout_.max_bucket_padded() * elem_ : staging + chunk * elem_;
    }
    if (plan_.grads_sharded()) return grads_->data() + bl.shard_offset * elem_;
    return grads_->data() + (bl.offset + chunk) * elem_;
}

unsigned char *StepEngine::device_owned_params(int b) const {
    const auto &bl = layout_.bucket(b);
    if (plan_.params_sharded()) return params_->data() + bl.shard_offset * elem_;
    const std::size_t chunk = plan_.state_sharded() ? std::size_t(group_rank_) * bl.shard : 0;
    return params_->data() + (bl.offset + chunk) * elem_;
}

void StepEngine::poll_reductions() {
    for (int b : reduce_order_) {
        BucketProgress &progress = buckets_[std::size_t(b)];
        if (progress.phase != BucketPhase::reducing) continue;
        // Collectives complete in issue order: the first one still running ends the poll.
        if (progress.compressed || !progress.work || !progress.work->test()) return;
        complete_reduction(b);
    }
}

void StepEngine::run(const std::vector<OffloadOp> &ops, double clip, std::vector<double> *stats, double *sumsq) {
    const DType dtype = layout_.dtype();
    double *stats_data = stats && !stats->empty() ? stats->data() : nullptr;
    for (const OffloadOp &op : ops) {
        const int b = op.bucket;
        switch (op.kind) {
        case OffloadOp::Kind::copy_grads_to_host: {
            const OwnedRegion r = owned_region(plan_, layout_, b);
            const CopyMark copied = lanes_->copy_to_host_async(host_grads_->data() + r.host_offset * elem_,
                                                         reduced_owned_region(b), r.count * elem_);
            grads_copied_[std::size_t(b)] = copied;
            if (offload_.gradients) staging_[std::size_t(buckets_[std::size_t(b)].staging_index)].read_by_copy = copied;
            break;
        }
        case OffloadOp::Kind::wait_grads_on_host: lanes_->wait(grads_copied_[std::size_t(b)]); break;
        case OffloadOp::Kind::norm_on_host: {
            // The chunks global_sum_of_squares sums on the device, in its order.
            std::vector<Span> spans;
            for (const auto &s : chunk_segments_) {
                if (grid_.tp_rank != 0 && layout_.tensor(s.tensor).tp_replicated) continue;
                spans.push_back({host_at(host_grads_, s), s.count, s.tensor});
            }
            require(sumsq != nullptr, ErrorCode::invalid_state, "offload: the norm has nowhere to go");
            *sumsq = lanes_->host_sum_of_squares(spans, dtype);
            break;
        }
        case OffloadOp::Kind::wait_params_copy: lanes_->wait(params_copied_[std::size_t(b)]); break;
        case OffloadOp::Kind::begin_update: {
            BucketUpdate &u = updates_[std::size_t(b)];
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
            if (stats_data)
                host_comm(*grid_.shard).allreduce(stats_data, stats_data, stats->size(), DType::f64, ReduceOp::sum);
            break;
        case OffloadOp::Kind::finish_update: updates_[std::size_t(b)].updater->apply(stats_data); break;
        case OffloadOp::Kind::copy_params_to_device: {
            const OwnedRegion r = owned_region(plan_, layout_, b);
            params_copied_[std::size_t(b)] =
                lanes_->copy_to_device_async(device_owned_params(b), host_master_->data() + r.host_offset * elem_,
                                       r.count * elem_);
            break;
        }
        case OffloadOp::Kind::device_waits_params: lanes_->compute_waits(params_copied_[std::size_t(b)]); break;
        case OffloadOp::Kind::copy_shard_to_device: {
            const auto &bl = layout_.bucket(b);
            params_copied_[std::size_t(b)] =
                lanes_->copy_to_device_async(units_[std::size_t(b)].buffer->data() + std::size_t(group_rank_) * bl.shard * elem_,
                                       params_->data() + bl.shard_offset * elem_, bl.shard * elem_);
            break;
        }
        case OffloadOp::Kind::gather_params: {
            if (plan_.params_sharded()) { // FSDP: the unit the caller asked for
                gather_unit(b);
                break;
            }
            const auto &bl = layout_.bucket(b); // ZeRO-1/2: the other ranks' chunks of the bucket
            unsigned char *bucket = params_->data() + bl.offset * elem_;
            space_->before_collective(*grid_.shard);
            param_gathers_[std::size_t(b)] = grid_.shard->allgather_async(
                bucket + std::size_t(group_rank_) * bl.shard * elem_, bucket, bl.shard, dtype);
            break;
        }
        }
    }
}

double StepEngine::host_sum_of_squares() {
    double local = 0.0;
    run(schedule_->gradients_on_host(), 1.0, nullptr, &local);
    return space_->allreduce_scalar(*grid_.world, local, ReduceOp::sum);
}

void StepEngine::offload_update(double clip) {
    if (plan_.gather_after_step()) param_gathers_.resize(std::size_t(layout_.bucket_count()));
    const int per_tensor = updates_.empty() ? 0 : updates_.front().updater->tensor_stats();
    std::vector<double> stats(std::size_t(per_tensor) * std::size_t(layout_.tensor_count()), 0.0);
    run(schedule_->update(), clip, &stats);
}

void StepEngine::refresh_master() {
    if (!host_master_) return;
    for (int b = 0; b < layout_.bucket_count(); ++b) {
        const OwnedRegion r = owned_region(plan_, layout_, b);
        space_->copy_to_host(host_master_->data() + r.host_offset * elem_, device_owned_params(b), r.count * elem_);
    }
}

void StepEngine::finish_copies() noexcept {
    if (!lanes_) return;
    for (const auto *marks : {&grads_copied_, &params_copied_})
        for (const CopyMark &mark : *marks) {
            try {
                lanes_->wait(mark);
            } catch (...) { // a failed device: nothing left to wait for
            }
        }
}

} // namespace shardopt::engine

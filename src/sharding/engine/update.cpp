#include "update.hpp"

#include <algorithm>
#include <cstring>

namespace shardopt::engine {

Update::Update(const EngineContext &ctx, const std::vector<OwnedSegment> &owned, int state_slots)
    : ctx_(ctx), layout_(ctx.layout, ctx.optimizer, ctx.plan.state_sharded(), ctx.group_size()),
      buckets_(std::size_t(ctx.layout.bucket_count())), state_slots_(state_slots) {
    for (const auto &s : owned) buckets_[std::size_t(ctx.layout.tensor(s.tensor).bucket)].segments.push_back(s);
}

Update::~Update() = default;

void Update::combine_stats(int p, std::vector<double> &stats) const {
    // Whole tensors on every rank (state not sharded): each rank's statistics are complete.
    if (layout_.phase_size(p) == 0 || !ctx_.plan.state_sharded() || ctx_.group_size() < 2) return;
    double *round = stats.data() + layout_.phase_begin(p);
    ctx_.host_comms.of(*ctx_.grid.shard).allreduce(round, round, layout_.phase_size(p), DType::f64, layout_.phase_op(p));
}

void Update::set_lr(double lr) {
    for (auto &u : buckets_) u.updater->set_lr(lr);
}

void Update::set_step_count(std::int64_t steps) {
    for (auto &u : buckets_) u.updater->set_step_count(steps);
}

std::vector<unsigned char> Update::state_to_host(int k) const {
    const bool sharded = ctx_.plan.state_sharded();
    const std::size_t elem = ctx_.elem();
    std::vector<unsigned char> host((sharded ? ctx_.layout.shard_count() : ctx_.layout.padded_count()) * elem, 0);
    for (const BucketUpdate &u : buckets_)
        for (std::size_t i = 0; i < u.segments.size(); ++i) {
            const OwnedSegment &s = u.segments[i];
            u.updater->read_state(int(i), k, host.data() + (sharded ? s.local : s.flat) * elem);
        }
    return host;
}

void Update::read_state_range(int k, std::size_t first, std::size_t count, unsigned char *dst) const {
    const bool sharded = ctx_.plan.state_sharded();
    const std::size_t elem = ctx_.elem(), last = first + count;
    std::memset(dst, 0, count * elem); // unowned elements and padding, as state_to_host
    std::vector<unsigned char> scratch;
    for (const BucketUpdate &u : buckets_)
        for (std::size_t i = 0; i < u.segments.size(); ++i) {
            const OwnedSegment &s = u.segments[i];
            const std::size_t lo = sharded ? s.local : s.flat, hi = lo + s.count;
            const std::size_t a = std::max(lo, first), b = std::min(hi, last);
            if (a >= b) continue;
            if (a == lo && b == hi) {
                u.updater->read_state(int(i), k, dst + (lo - first) * elem);
                continue;
            }
            scratch.resize(s.count * elem);
            u.updater->read_state(int(i), k, scratch.data());
            std::memcpy(dst + (a - first) * elem, scratch.data() + (a - lo) * elem, (b - a) * elem);
        }
}

void Update::transform_matrices() {
    const std::size_t elem = ctx_.elem();
    Communicator &group = ctx_.host_comms.of(*ctx_.grid.shard);
    const bool split = ctx_.plan.state_sharded() && group.size() > 1; // else every rank holds each matrix whole
    std::vector<unsigned char> whole;
    for (const UpdateLayout::MatrixJob &job : layout_.matrix_jobs()) {
        const std::size_t count = job.rows * job.cols, first = ctx_.layout.tensor(job.tensor).offset;
        whole.assign(count * elem, 0);
        auto each_part = [&](auto &&f) { // this rank's parts of the matrix: (span's buffer, offset, count)
            for (const BucketUpdate &u : buckets_)
                for (std::size_t i = 0; i < u.segments.size(); ++i)
                    if (u.segments[i].tensor == job.tensor)
                        f(static_cast<unsigned char *>(u.updater->matrix_part(int(i))), u.segments[i].flat - first,
                          u.segments[i].count);
        };
        each_part([&](unsigned char *part, std::size_t at, std::size_t n) { std::memcpy(&whole[at * elem], part, n * elem); });
        // The parts are disjoint and the rest zeros: the sum is the matrix, exactly.
        if (split) group.allreduce(whole.data(), whole.data(), count, ctx_.dtype(), ReduceOp::sum);
        if (group.rank() == job.owner) {
            if (ctx_.dtype() == DType::f32)
                layout_.rule().transform_matrix(reinterpret_cast<float *>(whole.data()), job.rows, job.cols);
            else
                layout_.rule().transform_matrix(reinterpret_cast<double *>(whole.data()), job.rows, job.cols);
        }
        if (group.size() > 1) group.broadcast(whole.data(), count, ctx_.dtype(), job.owner);
        each_part([&](unsigned char *part, std::size_t at, std::size_t n) { std::memcpy(part, &whole[at * elem], n * elem); });
    }
}

void Update::state_from_host(int k, const unsigned char *host) {
    const bool sharded = ctx_.plan.state_sharded();
    auto at = [&](const OwnedSegment &s) { return host + (sharded ? s.local : s.flat) * ctx_.elem(); };
    std::vector<double> parts;
    if (layout_.restore_exchange()) { // what no rank holds alone, from every rank's part
        parts.assign(layout_.restore_size(), 0.0);
        for (const BucketUpdate &u : buckets_)
            for (std::size_t i = 0; i < u.segments.size(); ++i)
                u.updater->restore_parts(int(i), k, at(u.segments[i]), parts.data());
        ctx_.host_comms.of(*ctx_.grid.shard).allreduce(parts.data(), parts.data(), parts.size(), DType::f64,
                                                       ReduceOp::max);
    }
    for (const BucketUpdate &u : buckets_)
        for (std::size_t i = 0; i < u.segments.size(); ++i)
            u.updater->write_state(int(i), k, at(u.segments[i]), parts.empty() ? nullptr : parts.data());
}

std::size_t Update::state_bytes() const {
    std::size_t total = 0;
    for (const auto &u : buckets_) total += u.updater->state_bytes();
    return total;
}

std::unique_ptr<Update> make_update(const EngineContext &ctx, ParameterStore &params, GradientBuckets &grads,
                                    const std::vector<OwnedSegment> &owned, int state_slots) {
    if (ctx.offload.active()) return make_offloaded_update(ctx, params, grads, owned, state_slots);
    return make_space_update(ctx, params, grads, owned, state_slots);
}

} // namespace shardopt::engine

#include "sharded_optimizer_impl.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "shardopt/error.hpp"
#include "vector_ops.hpp"

namespace shardopt {

void validate_sharding_options(const ShardingOptions &o) {
    require(int(o.strategy) >= 0 && int(o.strategy) <= int(Strategy::local_sgd), ErrorCode::invalid_argument,
            "invalid strategy");
    require(o.gradient_accumulation_steps >= 1, ErrorCode::invalid_argument,
            "gradient_accumulation_steps must be >= 1");
    require(o.max_grad_norm >= 0.0, ErrorCode::invalid_argument, "max_grad_norm must be >= 0 (0 disables clipping)");
    require(o.staging_buffers >= 1, ErrorCode::invalid_argument, "staging_buffers must be >= 1");
    require(o.local_sgd_period >= 1, ErrorCode::invalid_argument, "local_sgd_period must be >= 1");
    require(o.update_threads >= 0, ErrorCode::invalid_argument, "update_threads must be >= 0 (0 = automatic)");
    if (o.strategy == Strategy::hybrid)
        require(o.hybrid_data_strategy == Strategy::ddp || o.hybrid_data_strategy == Strategy::zero1 ||
                    o.hybrid_data_strategy == Strategy::zero2 || o.hybrid_data_strategy == Strategy::fsdp,
                ErrorCode::invalid_argument, "hybrid_data_strategy must be ddp, zero1, zero2 or fsdp");
    if (o.strategy != Strategy::hybrid)
        require(o.pipeline_parallel_size == 1 && o.tensor_parallel_size == 1 && o.hsdp_replicas == 1,
                ErrorCode::invalid_argument,
                "pipeline/tensor parallel sizes and hsdp_replicas apply to the hybrid strategy only");
}

StrategyPlan StrategyPlan::of(Strategy s, const ShardingOptions &options) {
    StrategyPlan p;
    switch (s) {
    case Strategy::ddp: break;
    case Strategy::zero1: p.state_sharded = p.gather_after_step = true; break;
    case Strategy::zero2: p.grads_sharded = p.state_sharded = p.gather_after_step = true; break;
    case Strategy::fsdp: p.grads_sharded = p.state_sharded = p.params_sharded = true; break;
    case Strategy::local_sgd:
        p.reduce_grads = false;
        p.average_params_every = options.local_sgd_period;
        break;
    case Strategy::hybrid:
        throw Error(ErrorCode::invalid_argument, "hybrid_data_strategy must be ddp, zero1, zero2 or fsdp");
    }
    return p;
}

std::vector<OwnedSegment> owned_chunks(const ParameterSet &layout, int group_rank) {
    std::vector<OwnedSegment> segments;
    for (const auto &b : layout.buckets()) {
        const std::size_t begin = b.offset + std::size_t(group_rank) * b.shard, end = begin + b.shard;
        for (int t = b.first_tensor; t < b.first_tensor + b.tensor_count; ++t) {
            const auto &tl = layout.tensor(t);
            const std::size_t lo = std::max(begin, tl.offset), hi = std::min(end, tl.offset + tl.count);
            if (lo < hi) segments.push_back({t, lo, b.shard_offset + (lo - begin), hi - lo});
        }
    }
    return segments;
}

std::vector<OwnedSegment> whole_tensors(const ParameterSet &layout) {
    std::vector<OwnedSegment> segments;
    for (int t = 0; t < layout.tensor_count(); ++t) {
        const auto &tl = layout.tensor(t);
        segments.push_back({t, tl.offset, tl.offset, tl.count});
    }
    return segments;
}

ShardedOptimizer::Impl::Impl(ShardedOptimizer &o, HybridGrid g, StrategyPlan p, void *external_params)
    : owner(o), grid(std::move(g)), plan(p), dtype(o.layout_.dtype()), elem(o.layout_.element_size()),
      group_rank(grid.shard->rank()), group_size(grid.shard->size()), updater(o.options_.update_threads) {
    const ParameterSet &layout = o.layout_;
    const std::size_t full = layout.padded_count(), shard = layout.shard_count();

    if (external_params) {
        require(!plan.params_sharded, ErrorCode::invalid_argument,
                "FSDP keeps parameters sharded at rest: caller-owned full parameter buffers are not supported");
        params = static_cast<unsigned char *>(external_params);
    } else {
        params_storage.resize((plan.params_sharded ? shard : full) * elem);
        params = params_storage.data();
    }
    grads.resize((plan.grads_sharded ? shard : full) * elem);
    const int slots = o.optimizer_->state_slots();
    for (int k = 0; k < slots; ++k) {
        state.emplace_back((plan.state_sharded ? shard : full) * elem);
        const double init = o.optimizer_->state_initial_value(k);
        if (init != 0.0) {
            const std::size_t n = state.back().size() / elem;
            for (std::size_t i = 0; i < n; ++i) {
                if (dtype == DType::f32) reinterpret_cast<float *>(state.back().data())[i] = float(init);
                else reinterpret_cast<double *>(state.back().data())[i] = init;
            }
        }
    }
    if (o.options_.gradient_accumulation_steps > 1) accumulation.resize(full * elem);
    if (plan.grads_sharded) staging.resize(std::max(1, o.options_.staging_buffers));
    buckets.resize(layout.bucket_count());
    if (plan.params_sharded) units.resize(layout.bucket_count());

    chunk_segments = owned_chunks(layout, group_rank);
    update_segments = plan.state_sharded ? chunk_segments : whole_tensors(layout);
    note_buffers();
}

bool ShardedOptimizer::Impl::final_micro_step() const {
    return micro_step + 1 >= owner.options_.gradient_accumulation_steps;
}

void ShardedOptimizer::Impl::start_micro_step() {
    // Reductions still in flight read the buffers about to be reused: finish them first.
    for (int b : reduce_order)
        if (buckets[b].work) buckets[b].work->wait();
    reduce_order.clear();
    for (auto &progress : buckets) progress = BucketProgress{};
    for (auto &s : staging) s.bucket = -1;
}

std::size_t ShardedOptimizer::Impl::buffer_bytes() const {
    std::size_t total = accumulation.size();
    for (const auto &s : staging) total += s.buffer.size();
    for (const auto &u : units) total += u.buffer.size();
    for (const auto &f : free_unit_buffers) total += f.size();
    return total;
}

void ShardedOptimizer::Impl::note_buffers() { peak_buffer_bytes = std::max(peak_buffer_bytes, buffer_bytes()); }

int ShardedOptimizer::Impl::take_staging(int b) {
    for (int i = 0; i < int(staging.size()); ++i)
        if (staging[i].bucket < 0) return i;
    // Recycle the buffer whose reduction was issued first.
    for (int issued : reduce_order) {
        auto &progress = buckets[issued];
        if (progress.staging_index >= 0 && progress.phase == BucketPhase::reducing) {
            progress.work->wait();
            progress.phase = BucketPhase::done;
            const int index = progress.staging_index;
            progress.staging_index = -1;
            staging[index].bucket = -1;
            return index;
        }
    }
    std::string open;
    for (const auto &s : staging) open += (open.empty() ? "" : ", ") + std::to_string(s.bucket);
    throw Error(ErrorCode::invalid_state,
                "cannot open bucket " + std::to_string(b) + ": all " + std::to_string(staging.size()) +
                    " gradient staging buffers hold buckets not yet marked ready (" + open +
                    "); call grad_ready on one first, or raise staging_buffers");
}

unsigned char *ShardedOptimizer::Impl::bucket_grad(int b) {
    const auto &bl = owner.layout_.bucket(b);
    auto &progress = buckets[b];
    if (progress.phase == BucketPhase::reducing || progress.phase == BucketPhase::done)
        throw Error(ErrorCode::invalid_state, "bucket " + std::to_string(b) +
                                                  " was already marked ready in this micro-step; call zero_grad() to start the next one");
    if (!plan.grads_sharded) {
        unsigned char *region = grads.data() + bl.offset * elem;
        if (progress.phase == BucketPhase::idle) std::memset(region, 0, bl.padded * elem);
        progress.phase = BucketPhase::open;
        return region;
    }
    if (progress.phase == BucketPhase::idle) {
        const int index = take_staging(b);
        auto &s = staging[index];
        if (s.buffer.size() < owner.layout_.max_bucket_padded() * elem)
            s.buffer.resize(owner.layout_.max_bucket_padded() * elem);
        std::memset(s.buffer.data(), 0, bl.padded * elem);
        s.bucket = b;
        progress.staging_index = index;
        progress.phase = BucketPhase::open;
        note_buffers();
    }
    return staging[progress.staging_index].buffer.data();
}

void ShardedOptimizer::Impl::grad_ready(int b) {
    const auto &bl = owner.layout_.bucket(b);
    auto &progress = buckets[b];
    if (progress.phase == BucketPhase::reducing || progress.phase == BucketPhase::done)
        throw Error(ErrorCode::invalid_state, "grad_ready(" + std::to_string(b) + ") called twice in one micro-step");
    unsigned char *buffer = bucket_grad(b); // a bucket never opened contributes zeros
    const int accumulate_steps = owner.options_.gradient_accumulation_steps;
    if (!final_micro_step()) {
        add_into(accumulation.data() + bl.offset * elem, buffer, bl.padded, dtype);
        progress.phase = BucketPhase::done;
        if (progress.staging_index >= 0) {
            staging[progress.staging_index].bucket = -1;
            progress.staging_index = -1;
        }
        return;
    }
    if (accumulate_steps > 1) {
        add_into(buffer, accumulation.data() + bl.offset * elem, bl.padded, dtype);
        scale(buffer, bl.padded, dtype, 1.0 / accumulate_steps);
    }
    // Tensor-parallel replicated tensors: average their gradient across the tensor group.
    if (grid.tensor && grid.tensor->size() > 1) {
        for (int t = bl.first_tensor; t < bl.first_tensor + bl.tensor_count; ++t) {
            const auto &tl = owner.layout_.tensor(t);
            if (tl.tp_replicated) {
                unsigned char *g = buffer + (tl.offset - bl.offset) * elem;
                grid.tensor->allreduce(g, g, tl.count, dtype, ReduceOp::avg);
            }
        }
    }
    launch_reduction(b, buffer);
}

void ShardedOptimizer::Impl::launch_reduction(int b, unsigned char *buffer) {
    const auto &bl = owner.layout_.bucket(b);
    auto &progress = buckets[b];
    Communicator &group = *grid.shard;
    if (!plan.reduce_grads) {
        progress.phase = BucketPhase::done;
        return;
    }
    if (plan.grads_sharded) {
        progress.work = group.reduce_scatter_async(buffer, grads.data() + bl.shard_offset * elem, bl.shard, dtype,
                                                   ReduceOp::avg);
    } else {
        progress.work = group.allreduce_async(buffer, buffer, bl.padded, dtype, ReduceOp::avg);
    }
    progress.phase = BucketPhase::reducing;
    reduce_order.push_back(b);
}

void ShardedOptimizer::Impl::wait_reductions() {
    for (int b : reduce_order) {
        auto &progress = buckets[b];
        if (progress.phase == BucketPhase::reducing) {
            progress.work->wait();
            progress.phase = BucketPhase::done;
        }
        progress.work.reset();
        if (progress.staging_index >= 0) {
            staging[progress.staging_index].bucket = -1;
            progress.staging_index = -1;
        }
    }
    reduce_order.clear();
    // HSDP: shards reduced inside each group are averaged across the replica groups.
    if (grid.replica && plan.reduce_grads) grid.replica->allreduce(grads.data(), grads.data(), grads.size() / elem, dtype, ReduceOp::avg);
}

unsigned char *ShardedOptimizer::Impl::grad_at(const OwnedSegment &s) {
    return grads.data() + (plan.grads_sharded ? s.local : s.flat) * elem;
}

unsigned char *ShardedOptimizer::Impl::param_at(const OwnedSegment &s) {
    return params + (plan.params_sharded ? s.local : s.flat) * elem;
}

double ShardedOptimizer::Impl::global_sum_of_squares() {
    // LocalSGD: each rank steps on its own gradient, so the norm is of the local gradient.
    if (!plan.reduce_grads) {
        double local = 0.0;
        for (const auto &s : update_segments) local += sum_of_squares(grad_at(s), s.count, dtype);
        return local;
    }
    // Every other strategy sums the same chunks in the same order, so the norm (and hence
    // clipping) is bitwise identical across DDP/ZeRO/FSDP at one world size.
    double local = 0.0;
    if (grid.replica_rank == 0)
        for (const auto &s : chunk_segments) {
            if (grid.tp_rank != 0 && owner.layout_.tensor(s.tensor).tp_replicated) continue;
            local += sum_of_squares(grad_at(s), s.count, dtype);
        }
    double total = local;
    grid.world->allreduce(&local, &total, 1, DType::f64, ReduceOp::sum);
    return total;
}

void ShardedOptimizer::Impl::apply_update(double clip_factor) {
    const Optimizer &opt = *owner.optimizer_;
    const std::int64_t step = owner.step_count_ + 1;
    auto segment = [&](const OwnedSegment &s, auto *type_tag) {
        using T = std::remove_pointer_t<decltype(type_tag)>;
        Segment<T> seg;
        seg.param = reinterpret_cast<T *>(param_at(s));
        seg.grad = reinterpret_cast<const T *>(grad_at(s));
        for (int k = 0; k < int(state.size()); ++k)
            seg.state[k] = reinterpret_cast<T *>(state[k].data()) + (plan.state_sharded ? s.local : s.flat);
        seg.count = s.count;
        seg.tensor = s.tensor;
        return seg;
    };
    if (clip_factor != 1.0)
        for (const auto &s : update_segments) scale(grad_at(s), s.count, dtype, clip_factor);

    auto run = [&](auto *type_tag) {
        std::vector<Segment<std::remove_pointer_t<decltype(type_tag)>>> segments;
        segments.reserve(update_segments.size());
        for (const auto &s : update_segments) segments.push_back(segment(s, type_tag));
        std::vector<double> stats;
        const int per_tensor = opt.tensor_stats();
        if (per_tensor > 0) {
            stats.assign(std::size_t(owner.layout_.tensor_count()) * per_tensor, 0.0);
            updater.begin_step(opt, segments, step, stats.data());
            if (plan.state_sharded && group_size > 1)
                grid.shard->allreduce(stats.data(), stats.data(), stats.size(), DType::f64, ReduceOp::sum);
        }
        updater.apply(opt, segments, step, stats.empty() ? nullptr : stats.data());
    };
    if (dtype == DType::f32) run((float *)nullptr);
    else run((double *)nullptr);
}

void ShardedOptimizer::Impl::gather_params_after_step() {
    param_gathers.resize(owner.layout_.bucket_count());
    for (int b = 0; b < owner.layout_.bucket_count(); ++b) {
        const auto &bl = owner.layout_.bucket(b);
        unsigned char *bucket = params + bl.offset * elem;
        param_gathers[b] =
            grid.shard->allgather_async(bucket + std::size_t(group_rank) * bl.shard * elem, bucket, bl.shard, dtype);
    }
    if (!owner.options_.overlap_param_gather) wait_param_gathers();
}

void ShardedOptimizer::Impl::wait_param_gather(int b) {
    if (b < int(param_gathers.size()) && param_gathers[b]) {
        auto work = std::move(param_gathers[b]);
        work->wait();
    }
}

void finish_quietly(WorkPtr &work) noexcept {
    if (!work) return;
    try {
        work->wait();
    } catch (...) { // the operation failed; all that matters here is that it is over
    }
    work.reset();
}

void ShardedOptimizer::Impl::finish_in_flight() noexcept {
    for (auto &progress : buckets) finish_quietly(progress.work);
    for (auto &work : param_gathers) finish_quietly(work);
    for (auto &unit : units) finish_quietly(unit.work);
}

void ShardedOptimizer::Impl::wait_param_gathers() {
    for (int b = 0; b < int(param_gathers.size()); ++b) wait_param_gather(b);
}

void ShardedOptimizer::Impl::average_params() {
    const std::size_t n = owner.layout_.padded_count();
    grid.shard->allreduce(params, params, n, dtype, ReduceOp::avg);
}

StepResult ShardedOptimizer::Impl::step() {
    StepResult result;
    wait_param_gathers(); // the update rewrites shards a previous allgather may still be reading
    for (int b = 0; b < int(buckets.size()); ++b)
        if (buckets[b].phase == BucketPhase::idle || buckets[b].phase == BucketPhase::open) grad_ready(b);
    if (!final_micro_step()) {
        ++micro_step;
        result.accumulating = true;
        return result;
    }
    using Clock = std::chrono::steady_clock;
    const auto seconds_since = [](Clock::time_point t) {
        return std::chrono::duration<double>(Clock::now() - t).count();
    };
    auto t0 = Clock::now();
    wait_reductions();
    result.reduce_wait_seconds = seconds_since(t0);
    release_all_units();
    micro_step = 0;
    if (owner.options_.gradient_accumulation_steps > 1) accumulation.zero();

    const double sumsq = global_sum_of_squares();
    result.grad_norm = std::sqrt(sumsq);
    bool finite = std::isfinite(sumsq);
    if (!plan.reduce_grads) { // LocalSGD: one rank's NaN must stop every rank's step
        int32_t bad = finite ? 0 : 1;
        grid.world->allreduce(&bad, &bad, 1, DType::i32, ReduceOp::max);
        finite = bad == 0;
    }
    if (!finite && owner.options_.skip_nonfinite) {
        result.skipped_nonfinite = true;
        return result;
    }
    double clip = 1.0;
    const double max_norm = owner.options_.max_grad_norm;
    if (max_norm > 0.0) clip = std::min(1.0, max_norm / (result.grad_norm + 1e-6)); // as torch clip_grad_norm_
    t0 = Clock::now();
    apply_update(clip);
    result.update_seconds = seconds_since(t0);
    ++owner.step_count_;
    result.applied = true;
    t0 = Clock::now();
    if (plan.gather_after_step) gather_params_after_step();
    if (plan.average_params_every > 0 && owner.step_count_ % plan.average_params_every == 0) average_params();
    result.post_update_seconds = seconds_since(t0);
    return result;
}

// --- FSDP units ----------------------------------------------------------------------------
void ShardedOptimizer::Impl::start_gather(int b) {
    const auto &bl = owner.layout_.bucket(b);
    auto &unit = units[b];
    if (!free_unit_buffers.empty()) {
        unit.buffer = std::move(free_unit_buffers.back());
        free_unit_buffers.pop_back();
    } else {
        unit.buffer.resize(owner.layout_.max_bucket_padded() * elem);
    }
    unit.work = grid.shard->allgather_async(params + bl.shard_offset * elem, unit.buffer.data(), bl.shard, dtype);
    unit.gathered = true;
    note_buffers();
}

void *ShardedOptimizer::Impl::gather(int b) {
    const auto &bl = owner.layout_.bucket(b);
    if (!plan.params_sharded) {
        wait_param_gather(b);
        return params + bl.offset * elem;
    }
    auto &unit = units[b];
    if (!unit.gathered) start_gather(b);
    // Prefetch the next unit in the direction of travel (forward or backward).
    if (owner.options_.fsdp_prefetch) {
        const int next = (last_gathered > b) ? b - 1 : b + 1;
        if (next >= 0 && next < int(units.size()) && !units[next].gathered) start_gather(next);
    }
    last_gathered = b;
    if (unit.work) {
        unit.work->wait();
        unit.work.reset();
    }
    return unit.buffer.data();
}

void ShardedOptimizer::Impl::release(int b) {
    owner.layout_.bucket(b); // range check
    if (!plan.params_sharded) return;
    auto &unit = units[b];
    if (!unit.gathered) return;
    if (unit.work) {
        unit.work->wait();
        unit.work.reset();
    }
    unit.gathered = false;
    // Keep as many spare buffers as units can be live at once (the current one, plus the
    // prefetched one), so the steady state allocates nothing; free the rest.
    const std::size_t live_units = owner.options_.fsdp_prefetch ? 2 : 1;
    if (free_unit_buffers.size() < live_units) free_unit_buffers.push_back(std::move(unit.buffer));
    else unit.buffer.release();
}

void ShardedOptimizer::Impl::release_all_units() {
    for (int b = 0; b < int(units.size()); ++b) release(b);
    last_gathered = -1;
}

// --- whole-parameter access -------------------------------------------------------------------
void gather_packed(const ParameterSet &layout, Communicator *shard, const unsigned char *base, void *packed_raw) {
    auto *packed = static_cast<unsigned char *>(packed_raw);
    const std::size_t elem = layout.element_size();
    AlignedBuffer unit;
    std::size_t out = 0;
    for (const auto &bl : layout.buckets()) {
        const unsigned char *full = base + bl.offset * elem;
        if (shard) {
            if (unit.size() < bl.padded * elem) unit.resize(layout.max_bucket_padded() * elem);
            shard->allgather(base + bl.shard_offset * elem, unit.data(), bl.shard, layout.dtype());
            full = unit.data();
        }
        std::memcpy(packed + out * elem, full, bl.count * elem);
        out += bl.count;
    }
}

void ShardedOptimizer::Impl::get_parameters(void *packed) {
    wait_param_gathers();
    gather_packed(owner.layout_, plan.params_sharded ? grid.shard.get() : nullptr, params, packed);
}

void ShardedOptimizer::Impl::get_state(int k, void *packed) {
    gather_packed(owner.layout_, plan.state_sharded ? grid.shard.get() : nullptr, state.at(std::size_t(k)).data(),
                  packed);
}

void ShardedOptimizer::Impl::restore(const std::vector<unsigned char> &new_params,
                                     const std::vector<std::vector<unsigned char>> &new_state, std::int64_t step_count,
                                     double lr) {
    release_all_units();
    std::memcpy(params, new_params.data(), new_params.size());
    for (std::size_t k = 0; k < state.size(); ++k) std::memcpy(state[k].data(), new_state[k].data(), new_state[k].size());
    owner.step_count_ = step_count;
    owner.optimizer_->set_lr(lr);
}

void ShardedOptimizer::Impl::set_parameters(const void *packed_raw) {
    wait_param_gathers();
    const auto *packed = static_cast<const unsigned char *>(packed_raw);
    const ParameterSet &layout = owner.layout_;
    std::size_t in = 0;
    for (const auto &bl : layout.buckets()) {
        if (plan.params_sharded) {
            // Copy the part of this bucket that falls in the own chunk.
            const std::size_t begin = std::size_t(group_rank) * bl.shard;
            const std::size_t end = std::min(bl.count, begin + bl.shard);
            unsigned char *shard = params + bl.shard_offset * elem;
            std::memset(shard, 0, bl.shard * elem);
            if (begin < end) std::memcpy(shard, packed + (in + begin) * elem, (end - begin) * elem);
        } else {
            unsigned char *full = params + bl.offset * elem;
            std::memcpy(full, packed + in * elem, bl.count * elem);
            std::memset(full + bl.count * elem, 0, (bl.padded - bl.count) * elem);
        }
        in += bl.count;
    }
}

void check_state_agreement(Communicator &group, std::int64_t step_count, const ParameterSet &layout,
                           const OptimizerOptions &opts) {
    const std::int64_t facts[4] = {step_count, std::int64_t(layout.fingerprint() >> 1), std::int64_t(opts.kind),
                                   std::int64_t(std::llround(opts.lr * 1e12))};
    std::int64_t lo[4], hi[4];
    group.allreduce(facts, lo, 4, DType::i64, ReduceOp::min);
    group.allreduce(facts, hi, 4, DType::i64, ReduceOp::max);
    static const char *names[4] = {"step count", "parameter layout", "optimizer kind", "learning rate"};
    for (int i = 0; i < 4; ++i)
        if (lo[i] != hi[i])
            throw Error(ErrorCode::mismatch, std::string("synchronize_optimizer_state: ranks disagree on the ") +
                                                 names[i] + " (rank " + std::to_string(group.rank()) + " has " +
                                                 std::to_string(facts[i]) + ", range across ranks " +
                                                 std::to_string(lo[i]) + ".." + std::to_string(hi[i]) + ")");
}

void for_each_replicated_part(const StrategyPlan &plan, const HybridGrid &grid, int state_slots,
                              const std::function<void(int part, Communicator &comm, SyncOp op)> &fn) {
    Communicator &group = *grid.shard;
    if (!plan.reduce_grads) {
        for (int k = -1; k < state_slots; ++k) fn(k, group, SyncOp::average);
        return;
    }
    if (!plan.params_sharded) fn(-1, group, SyncOp::broadcast_from_0);
    if (!plan.state_sharded)
        for (int k = 0; k < state_slots; ++k) fn(k, group, SyncOp::broadcast_from_0);
    if (grid.replica) { // HSDP: shards are replicated across groups
        if (plan.params_sharded) fn(-1, *grid.replica, SyncOp::broadcast_from_0);
        for (int k = 0; k < state_slots; ++k) fn(k, *grid.replica, SyncOp::broadcast_from_0);
    }
}

void ShardedOptimizer::Impl::synchronize_state() {
    wait_param_gathers();
    // 1. Agreement on everything every rank must share: step, layout, optimizer options.
    check_state_agreement(*grid.shard, owner.step_count_, owner.layout_, owner.optimizer_->options());
    // 2. Replicated data made identical.
    const std::size_t param_count = plan.params_sharded ? owner.layout_.shard_count() : owner.layout_.padded_count();
    for_each_replicated_part(plan, grid, int(state.size()), [&](int k, Communicator &comm, SyncOp op) {
        unsigned char *data = k < 0 ? params : state[std::size_t(k)].data();
        const std::size_t count = k < 0 ? param_count : state[std::size_t(k)].size() / elem;
        if (op == SyncOp::average) comm.allreduce(data, data, count, dtype, ReduceOp::avg);
        else comm.broadcast(data, count, dtype, 0);
    });
}

} // namespace shardopt

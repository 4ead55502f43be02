#include "device_engine.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>

#include "shardopt/error.hpp"

namespace shardopt::device {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

void validate(const ParameterSet &layout, const OptimizerOptions &optimizer, const StrategyPlan &plan,
              int group_size) {
    optimizer.validate();
    require(layout.dtype() == DType::f32, ErrorCode::invalid_argument,
            std::string("the device sharded optimizer keeps f32 parameters; the layout's dtype is ") +
                dtype_name(layout.dtype()));
    // LAMB's per-tensor norms would need a reduction across ranks between its passes.
    require(!(optimizer.kind == OptimizerKind::lamb && plan.state_sharded && group_size > 1),
            ErrorCode::unsupported,
            "LAMB on the device needs whole tensors on each rank: use ddp or local_sgd (or the host "
            "ShardedOptimizer, which reduces LAMB's per-tensor norms across shards)");
}

} // namespace

DeviceEngine::DeviceEngine(std::unique_ptr<DeviceSpace> space, CommunicatorPtr comm, ParameterSet layout,
                           const OptimizerOptions &optimizer, const ShardingOptions &options, const void *initial)
    : space_(std::move(space)), comm_(std::move(comm)), layout_(std::move(layout)), optimizer_(optimizer),
      options_(options) {
    require(space_ != nullptr, ErrorCode::invalid_argument, "device space is null");
    require(comm_ != nullptr, ErrorCode::invalid_argument, "communicator is null");
    validate_sharding_options(options_);
    grid_ = HybridGrid::for_options(comm_, options_);
    plan_ = StrategyPlan::of(data_strategy_of(options_), options_);
    group_rank_ = grid_.shard->rank();
    group_size_ = grid_.shard->size();
    validate(layout_, optimizer_, plan_, group_size_);
    layout_.plan(group_size_);
    elem_ = layout_.element_size();

    const std::size_t full = layout_.padded_count(), shard = layout_.shard_count();
    params_ = space_->allocate((plan_.params_sharded ? shard : full) * elem_, "parameters");
    grads_ = space_->allocate((plan_.grads_sharded ? shard : full) * elem_, "gradients");
    if (options_.gradient_accumulation_steps > 1)
        accumulation_ = space_->allocate(full * elem_, "gradient accumulation buffer");
    if (plan_.grads_sharded) staging_.resize(std::size_t(std::max(1, options_.staging_buffers)));
    buckets_.resize(std::size_t(layout_.bucket_count()));
    if (plan_.params_sharded) units_.resize(std::size_t(layout_.bucket_count()));

    chunk_segments_ = owned_chunks(layout_, group_rank_);
    const std::vector<OwnedSegment> owned = plan_.state_sharded ? chunk_segments_ : whole_tensors(layout_);
    updates_.resize(std::size_t(layout_.bucket_count()));
    for (const auto &s : owned) updates_[std::size_t(layout_.tensor(s.tensor).bucket)].segments.push_back(s);
    for (auto &u : updates_) {
        std::vector<Span> spans;
        for (const auto &s : u.segments) spans.push_back({param_at(s), s.count});
        u.updater = space_->make_updater(spans, layout_.dtype(), optimizer_);
    }
    state_slots_ = Optimizer::create(optimizer_)->state_slots();
    note_buffers();
    if (initial) set_parameters(initial);
}

DeviceEngine::~DeviceEngine() {
    finish_in_flight();
    try {
        space_->synchronize(); // passes still reading buffers about to be freed
    } catch (...) { // a failed device: nothing left to wait for
    }
}

void DeviceEngine::finish_in_flight() noexcept {
    for (auto &progress : buckets_) finish_quietly(progress.work);
    for (auto &work : param_gathers_) finish_quietly(work);
    for (auto &unit : units_) finish_quietly(unit.work);
}

void DeviceEngine::set_lr(double lr) {
    OptimizerOptions changed = optimizer_;
    changed.lr = lr;
    changed.validate();
    optimizer_.lr = lr;
    for (auto &u : updates_) u.updater->set_lr(lr);
}

// --- parameters -------------------------------------------------------------------------------
void *DeviceEngine::parameters() {
    require(!plan_.params_sharded, ErrorCode::invalid_state,
            "FSDP keeps parameters sharded: use gather(unit) or get_parameters()");
    wait_param_gathers();
    return params_->data();
}

void *DeviceEngine::tensor_parameters(int t) {
    const auto &tl = layout_.tensor(t);
    if (!plan_.params_sharded) {
        wait_param_gather(tl.bucket);
        return params_->data() + tl.offset * elem_;
    }
    const Unit &unit = units_[std::size_t(tl.bucket)];
    require(unit.gathered, ErrorCode::invalid_state,
            "tensor '" + tl.name + "' belongs to unit " + std::to_string(tl.bucket) + ", which is not gathered");
    return unit.buffer->data() + (tl.offset - layout_.bucket(tl.bucket).offset) * elem_;
}

SpaceBufferPtr DeviceEngine::take_unit_buffer() {
    if (!free_unit_buffers_.empty()) {
        SpaceBufferPtr buffer = std::move(free_unit_buffers_.back());
        free_unit_buffers_.pop_back();
        return buffer;
    }
    return space_->allocate(layout_.max_bucket_padded() * elem_, "gathered FSDP unit");
}

void DeviceEngine::start_gather(int b) {
    const auto &bl = layout_.bucket(b);
    Unit &unit = units_[std::size_t(b)];
    unit.buffer = take_unit_buffer();
    // The buffer may have been read by the caller's kernels (an earlier unit), and the shard
    // written by the update: both on the compute stream.
    space_->before_collective(*grid_.shard);
    unit.work = grid_.shard->allgather_async(params_->data() + bl.shard_offset * elem_, unit.buffer->data(),
                                             bl.shard, layout_.dtype());
    unit.gathered = true;
    note_buffers();
}

void *DeviceEngine::gather(int b) {
    const auto &bl = layout_.bucket(b);
    if (!plan_.params_sharded) {
        wait_param_gather(b);
        return params_->data() + bl.offset * elem_;
    }
    Unit &unit = units_[std::size_t(b)];
    if (!unit.gathered) start_gather(b);
    if (options_.fsdp_prefetch) { // the next unit in the direction of travel
        const int next = (last_gathered_ > b) ? b - 1 : b + 1;
        if (next >= 0 && next < int(units_.size()) && !units_[std::size_t(next)].gathered) start_gather(next);
    }
    last_gathered_ = b;
    if (unit.work) {
        WorkPtr work = std::move(unit.work);
        work->wait();
    }
    return unit.buffer->data();
}

void DeviceEngine::release(int b) {
    layout_.bucket(b); // range check
    if (!plan_.params_sharded) return;
    Unit &unit = units_[std::size_t(b)];
    if (!unit.gathered) return;
    if (unit.work) {
        WorkPtr work = std::move(unit.work);
        work->wait();
    }
    unit.gathered = false;
    // Spares for the units live at once (current + prefetched), so the steady state allocates
    // nothing. A spare is only refilled by a gather ordered after the caller's kernels.
    const std::size_t live_units = options_.fsdp_prefetch ? 2 : 1;
    if (free_unit_buffers_.size() < live_units) free_unit_buffers_.push_back(std::move(unit.buffer));
    else unit.buffer.reset();
}

void DeviceEngine::release_all_units() {
    for (int b = 0; b < int(units_.size()); ++b) release(b);
    last_gathered_ = -1;
}

void DeviceEngine::get_parameters(void *packed_host) {
    require(packed_host != nullptr, ErrorCode::invalid_argument, "get_parameters: null buffer");
    wait_param_gathers();
    auto *packed = static_cast<unsigned char *>(packed_host);
    std::vector<unsigned char> bucket(layout_.max_bucket_padded() * elem_);
    SpaceBufferPtr gathered;
    if (plan_.params_sharded) gathered = space_->allocate(layout_.max_bucket_padded() * elem_, "parameter gather");
    std::size_t out = 0;
    for (int b = 0; b < layout_.bucket_count(); ++b) {
        const auto &bl = layout_.bucket(b);
        const unsigned char *full = params_->data() + bl.offset * elem_;
        if (plan_.params_sharded) {
            space_->before_collective(*grid_.shard);
            grid_.shard->allgather(params_->data() + bl.shard_offset * elem_, gathered->data(), bl.shard,
                                   layout_.dtype());
            full = gathered->data();
        }
        space_->copy_to_host(packed + out * elem_, full, bl.count * elem_);
        out += bl.count;
    }
}

void DeviceEngine::set_parameters(const void *packed_host) {
    require(packed_host != nullptr, ErrorCode::invalid_argument, "set_parameters: null buffer");
    wait_param_gathers();
    const auto *packed = static_cast<const unsigned char *>(packed_host);
    // The whole resident buffer (full or shard) is composed on the host, padding zeroed, and
    // copied in one transfer.
    std::vector<unsigned char> host(params_->bytes(), 0);
    std::size_t in = 0;
    for (const auto &bl : layout_.buckets()) {
        if (plan_.params_sharded) {
            const std::size_t begin = std::size_t(group_rank_) * bl.shard;
            const std::size_t end = std::min(bl.count, begin + bl.shard);
            if (begin < end)
                std::memcpy(host.data() + bl.shard_offset * elem_, packed + (in + begin) * elem_, (end - begin) * elem_);
        } else {
            std::memcpy(host.data() + bl.offset * elem_, packed + in * elem_, bl.count * elem_);
        }
        in += bl.count;
    }
    space_->copy_from_host(params_->data(), host.data(), host.size());
}

// --- step protocol ------------------------------------------------------------------------------
bool DeviceEngine::final_micro_step() const { return micro_step_ + 1 >= options_.gradient_accumulation_steps; }

void DeviceEngine::zero_grad() {
    // Reductions in flight read the buffers about to be reused: finish them first.
    for (int b : reduce_order_) {
        auto &progress = buckets_[std::size_t(b)];
        if (progress.work) {
            WorkPtr work = std::move(progress.work);
            work->wait();
        }
    }
    reduce_order_.clear();
    for (auto &progress : buckets_) progress = BucketProgress{};
    for (auto &s : staging_) s.bucket = -1;
}

std::size_t DeviceEngine::buffer_bytes() const {
    std::size_t total = accumulation_ ? accumulation_->bytes() : 0;
    for (const auto &s : staging_) total += s.buffer ? s.buffer->bytes() : 0;
    for (const auto &u : units_) total += u.buffer ? u.buffer->bytes() : 0;
    for (const auto &f : free_unit_buffers_) total += f->bytes();
    return total;
}

void DeviceEngine::note_buffers() { peak_buffer_bytes_ = std::max(peak_buffer_bytes_, buffer_bytes()); }

int DeviceEngine::take_staging(int b) {
    for (int i = 0; i < int(staging_.size()); ++i)
        if (staging_[std::size_t(i)].bucket < 0) return i;
    for (int issued : reduce_order_) { // recycle the buffer whose reduction was issued first
        auto &progress = buckets_[std::size_t(issued)];
        if (progress.staging_index >= 0 && progress.phase == BucketPhase::reducing) {
            WorkPtr work = std::move(progress.work);
            work->wait();
            progress.phase = BucketPhase::done;
            const int index = progress.staging_index;
            progress.staging_index = -1;
            staging_[std::size_t(index)].bucket = -1;
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

unsigned char *DeviceEngine::open_bucket(int b) {
    const auto &bl = layout_.bucket(b);
    auto &progress = buckets_[std::size_t(b)];
    if (progress.phase == BucketPhase::reducing || progress.phase == BucketPhase::done)
        throw Error(ErrorCode::invalid_state,
                    "bucket " + std::to_string(b) +
                        " was already marked ready in this micro-step; call zero_grad() to start the next one");
    if (!plan_.grads_sharded) {
        unsigned char *region = grads_->data() + bl.offset * elem_;
        if (progress.phase == BucketPhase::idle) space_->zero(region, bl.padded * elem_);
        progress.phase = BucketPhase::open;
        return region;
    }
    if (progress.phase == BucketPhase::idle) {
        const int index = take_staging(b);
        Staging &s = staging_[std::size_t(index)];
        if (!s.buffer) s.buffer = space_->allocate(layout_.max_bucket_padded() * elem_, "gradient staging buffer");
        space_->zero(s.buffer->data(), bl.padded * elem_);
        s.bucket = b;
        progress.staging_index = index;
        progress.phase = BucketPhase::open;
        note_buffers();
    }
    return staging_[std::size_t(progress.staging_index)].buffer->data();
}

void *DeviceEngine::bucket_grad(int b) {
    layout_.bucket(b);
    return open_bucket(b);
}

void *DeviceEngine::grad(int t) {
    const auto &tl = layout_.tensor(t);
    return open_bucket(tl.bucket) + (tl.offset - layout_.bucket(tl.bucket).offset) * elem_;
}

void DeviceEngine::grad_ready(int b) {
    const auto &bl = layout_.bucket(b);
    auto &progress = buckets_[std::size_t(b)];
    if (progress.phase == BucketPhase::reducing || progress.phase == BucketPhase::done)
        throw Error(ErrorCode::invalid_state, "grad_ready(" + std::to_string(b) + ") called twice in one micro-step");
    unsigned char *buffer = open_bucket(b); // a bucket never opened contributes zeros
    const DType dtype = layout_.dtype();
    const int accumulate_steps = options_.gradient_accumulation_steps;
    if (!final_micro_step()) {
        space_->add_into(accumulation_->data() + bl.offset * elem_, buffer, bl.padded, dtype);
        progress.phase = BucketPhase::done;
        if (progress.staging_index >= 0) {
            staging_[std::size_t(progress.staging_index)].bucket = -1;
            progress.staging_index = -1;
        }
        return;
    }
    if (accumulate_steps > 1) {
        space_->add_into(buffer, accumulation_->data() + bl.offset * elem_, bl.padded, dtype);
        space_->scale(buffer, bl.padded, dtype, 1.0 / accumulate_steps);
    }
    if (grid_.tensor && grid_.tensor->size() > 1) { // tensor-parallel replicated tensors: averaged
        for (int t = bl.first_tensor; t < bl.first_tensor + bl.tensor_count; ++t) {
            const auto &tl = layout_.tensor(t);
            if (!tl.tp_replicated) continue;
            unsigned char *g = buffer + (tl.offset - bl.offset) * elem_;
            space_->before_collective(*grid_.tensor);
            grid_.tensor->allreduce(g, g, tl.count, dtype, ReduceOp::avg);
        }
    }
    launch_reduction(b, buffer);
}

void DeviceEngine::launch_reduction(int b, unsigned char *buffer) {
    const auto &bl = layout_.bucket(b);
    auto &progress = buckets_[std::size_t(b)];
    if (!plan_.reduce_grads) {
        progress.phase = BucketPhase::done;
        return;
    }
    Communicator &group = *grid_.shard;
    space_->before_collective(group); // after the caller's kernels that wrote the gradients
    if (plan_.grads_sharded)
        progress.work = group.reduce_scatter_async(buffer, grads_->data() + bl.shard_offset * elem_, bl.shard,
                                                   layout_.dtype(), ReduceOp::avg);
    else
        progress.work = group.allreduce_async(buffer, buffer, bl.padded, layout_.dtype(), ReduceOp::avg);
    progress.phase = BucketPhase::reducing;
    reduce_order_.push_back(b);
}

void DeviceEngine::wait_reductions() {
    for (int b : reduce_order_) {
        auto &progress = buckets_[std::size_t(b)];
        if (progress.phase == BucketPhase::reducing) {
            WorkPtr work = std::move(progress.work);
            work->wait();
            progress.phase = BucketPhase::done;
        }
        progress.work.reset();
        if (progress.staging_index >= 0) {
            staging_[std::size_t(progress.staging_index)].bucket = -1;
            progress.staging_index = -1;
        }
    }
    reduce_order_.clear();
    if (grid_.replica && plan_.reduce_grads) { // HSDP: shards averaged across the replica groups
        space_->before_collective(*grid_.replica);
        grid_.replica->allreduce(grads_->data(), grads_->data(), grads_->bytes() / elem_, layout_.dtype(),
                                 ReduceOp::avg);
    }
}

unsigned char *DeviceEngine::grad_at(const OwnedSegment &s) const {
    return grads_->data() + (plan_.grads_sharded ? s.local : s.flat) * elem_;
}

unsigned char *DeviceEngine::param_at(const OwnedSegment &s) const {
    return params_->data() + (plan_.params_sharded ? s.local : s.flat) * elem_;
}

double DeviceEngine::global_sum_of_squares() {
    std::vector<Span> spans;
    if (!plan_.reduce_grads) { // LocalSGD: each rank steps on its own gradient
        for (const auto &u : updates_)
            for (const auto &s : u.segments) spans.push_back({grad_at(s), s.count});
        return space_->sum_of_squares(spans, layout_.dtype());
    }
    // The chunks every rank owns, in the order ShardedOptimizer sums them, so the norm is the
    // same on every strategy and rank count.
    if (grid_.replica_rank == 0)
        for (const auto &s : chunk_segments_) {
            if (grid_.tp_rank != 0 && layout_.tensor(s.tensor).tp_replicated) continue;
            spans.push_back({grad_at(s), s.count});
        }
    const double local = space_->sum_of_squares(spans, layout_.dtype());
    return space_->allreduce_scalar(*grid_.world, local, ReduceOp::sum);
}

void DeviceEngine::update_and_gather(double clip) {
    const bool gather = plan_.gather_after_step;
    if (gather) param_gathers_.resize(std::size_t(layout_.bucket_count()));
    for (int b = 0; b < layout_.bucket_count(); ++b) {
        BucketUpdate &u = updates_[std::size_t(b)];
        std::vector<const void *> grads;
        for (const auto &s : u.segments) {
            if (clip != 1.0) space_->scale(grad_at(s), s.count, layout_.dtype(), clip);
            grads.push_back(grad_at(s));
        }
        u.updater->step(grads);
        if (!gather) continue;
        // Bucket b's allgather (communicator's stream) runs while bucket b+1 is updated.
        const auto &bl = layout_.bucket(b);
        unsigned char *bucket = params_->data() + bl.offset * elem_;
        space_->before_collective(*grid_.shard);
        param_gathers_[std::size_t(b)] = grid_.shard->allgather_async(
            bucket + std::size_t(group_rank_) * bl.shard * elem_, bucket, bl.shard, layout_.dtype());
    }
}

void DeviceEngine::wait_param_gather(int b) {
    if (b < int(param_gathers_.size()) && param_gathers_[std::size_t(b)]) {
        WorkPtr work = std::move(param_gathers_[std::size_t(b)]);
        work->wait();
    }
}

void DeviceEngine::wait_param_gathers() {
    for (int b = 0; b < int(param_gathers_.size()); ++b) wait_param_gather(b);
}

void DeviceEngine::average_params() {
    space_->before_collective(*grid_.shard);
    grid_.shard->allreduce(params_->data(), params_->data(), layout_.padded_count(), layout_.dtype(), ReduceOp::avg);
}

StepResult DeviceEngine::step() {
    StepResult result;
    wait_param_gathers(); // the update rewrites shards a previous allgather may still be reading
    for (int b = 0; b < int(buckets_.size()); ++b) {
        const BucketPhase phase = buckets_[std::size_t(b)].phase;
        if (phase == BucketPhase::idle || phase == BucketPhase::open) grad_ready(b);
    }
    if (!final_micro_step()) {
        ++micro_step_;
        result.accumulating = true;
        return result;
    }
    auto t0 = Clock::now();
    wait_reductions();
    result.reduce_wait_seconds = seconds_since(t0);
    release_all_units();
    micro_step_ = 0;
    if (accumulation_) space_->zero(accumulation_->data(), accumulation_->bytes());

    const double sumsq = global_sum_of_squares();
    result.grad_norm = std::sqrt(sumsq);
    bool finite = std::isfinite(sumsq);
    if (!plan_.reduce_grads) // LocalSGD: one rank's NaN must stop every rank's step
        finite = space_->allreduce_scalar(*grid_.world, finite ? 0.0 : 1.0, ReduceOp::max) == 0.0;
    if (!finite && options_.skip_nonfinite) {
        result.skipped_nonfinite = true;
        return result;
    }
    double clip = 1.0;
    if (options_.max_grad_norm > 0.0) clip = std::min(1.0, options_.max_grad_norm / (result.grad_norm + 1e-6));
    t0 = Clock::now();
    update_and_gather(clip);
    result.update_seconds = seconds_since(t0);
    ++step_count_;
    result.applied = true;
    t0 = Clock::now();
    if (plan_.gather_after_step && !options_.overlap_param_gather) wait_param_gathers();
    if (plan_.average_params_every > 0 && step_count_ % plan_.average_params_every == 0) average_params();
    result.post_update_seconds = seconds_since(t0);
    return result;
}

MemoryStats DeviceEngine::memory_stats() const {
    MemoryStats m;
    m.params_bytes = params_->bytes();
    m.grads_bytes = grads_->bytes();
    for (const auto &u : updates_) m.optimizer_state_bytes += u.updater->state_bytes();
    m.buffer_bytes = buffer_bytes();
    m.peak_buffer_bytes = peak_buffer_bytes_;
    return m;
}

} // namespace shardopt::device

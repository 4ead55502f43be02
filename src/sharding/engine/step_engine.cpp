#include "step_engine.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>

#include "../../comm/finish_quietly.hpp"
#include "../../training/step_loop.hpp"
#include "../memory_plan.hpp"
#include "rank_agreement.hpp"
#include "shardopt/error.hpp"

namespace shardopt::engine {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The caller's parameter buffer, kept for the engine's life and never freed by it.
class BorrowedBuffer final : public SpaceBuffer {
  public:
    BorrowedBuffer(void *data, std::size_t bytes) : data_(static_cast<unsigned char *>(data)), bytes_(bytes) {}
    unsigned char *data() const noexcept override { return data_; }
    std::size_t bytes() const noexcept override { return bytes_; }

  private:
    unsigned char *data_;
    std::size_t bytes_;
};

} // namespace

StepEngine::StepEngine(std::unique_ptr<Space> space, CommunicatorPtr comm, ParameterSet layout,
                       const OptimizerOptions &optimizer, const ShardingOptions &options, const void *initial,
                       void *external_params)
    : space_(std::move(space)), comm_(std::move(comm)), layout_(std::move(layout)), optimizer_(optimizer),
      options_(options) {
    require(space_ != nullptr, ErrorCode::invalid_argument, "memory space is null");
    require(comm_ != nullptr, ErrorCode::invalid_argument, "communicator is null");
    validate_sharding_options(options_);
    optimizer_.validate();
    grid_ = HybridGrid::for_options(comm_, options_);
    plan_ = plan_of(options_);
    group_rank_ = grid_.shard->rank();
    group_size_ = grid_.shard->size();
    // Host memory has no lanes: there the flags are accepted and mean nothing.
    offload_ = OffloadPlan::of(options_, options_.cpu_offload_optimizer && space_->offload_lanes() != nullptr);
    if (offload_.active()) lanes_ = space_->offload_lanes();
    // Offloaded, the update is the CPU's, which sums LAMB's per-tensor statistics across shards.
    space_->check_supported(layout_.dtype(), optimizer_, plan_.state_sharded() && group_size_ > 1 && !offload_.active());
    layout_.plan(group_size_);
    elem_ = layout_.element_size();
    // Ranks that disagree fail here, all of them, naming the difference (not later, silently).
    require_same_options(host_comm(*grid_.world), optimizer_, options_);
    // Over the data group, whose ranks reduce gradients together (tensor-parallel ranks may
    // hold unevenly split tensors; pipeline stages hold different ones).
    require_same_layout(host_comm(*grid_.data), layout_);
    state_slots_ = Optimizer::create(optimizer_)->state_slots();
    if (space_->host_accessible()) // refuse up front, with an estimate, what cannot fit
        require_fits(MemoryPlan::of(plan_, layout_, state_slots_, options_, external_params != nullptr),
                     ranks_sharing_memory(*comm_), data_strategy_of(options_), layout_.element_count(),
                     optimizer_kind_name(optimizer_.kind));

    const std::size_t full = layout_.padded_count(), shard = layout_.shard_count();
    if (external_params) {
        require(!plan_.params_sharded(), ErrorCode::invalid_argument,
                "FSDP keeps parameters sharded at rest: caller-owned full parameter buffers are not supported");
        params_ = std::make_unique<BorrowedBuffer>(external_params, full * elem_);
    } else if (offload_.params) { // the shard at rest in host memory, where the CPU update writes it
        params_ = lanes_->allocate_pinned(shard * elem_, "parameter shard (cpu_offload_params)");
    } else {
        params_ = space_->allocate((plan_.params_sharded() ? shard : full) * elem_, "parameters");
    }
    if (!offload_.gradients) grads_ = space_->allocate((plan_.grads_sharded() ? shard : full) * elem_, "gradients");
    if (options_.gradient_accumulation_steps > 1)
        accumulation_ = space_->allocate(full * elem_, "gradient accumulation buffer");
    if (grads_staged()) staging_.resize(std::size_t(std::max(1, options_.staging_buffers)));
    buckets_.resize(std::size_t(layout_.bucket_count()));
    if (plan_.params_sharded()) units_.resize(std::size_t(layout_.bucket_count()));

    chunk_segments_ = owned_chunks(layout_, group_rank_);
    const std::vector<OwnedSegment> owned = plan_.state_sharded() ? chunk_segments_ : whole_tensors(layout_);
    updates_.resize(std::size_t(layout_.bucket_count()));
    for (const auto &s : owned) updates_[std::size_t(layout_.tensor(s.tensor).bucket)].segments.push_back(s);
    if (offload_.active()) {
        set_up_offload(owned);
    } else {
        for (auto &u : updates_) {
            std::vector<Span> spans;
            for (const auto &s : u.segments) spans.push_back({param_at(s), s.count, s.tensor});
            u.updater = space_->make_updater(spans, layout_.dtype(), optimizer_);
        }
    }
    if (options_.compression.enabled()) {
        require(space_->host_accessible(), ErrorCode::unsupported,
                std::string("gradient compression (") + compression_name(options_.compression.method) +
                    ") runs on host memory; an optimizer in " + space_->name() + " memory reduces uncompressed");
        const bool averages = plan_.after_update == AfterUpdate::average_params;
        if (plan_.reduce_grads() || averages)
            compressor_ = compression::make_compressed_reducer(
                *grid_.shard, layout_, options_.compression,
                plan_.grads_sharded() ? compression::ReduceMode::reduce_scatter : compression::ReduceMode::allreduce);
        if (averages) {
            anchor_ = space_->allocate(full * elem_, "LocalSGD compression anchor");
            delta_ = space_->allocate(layout_.max_bucket_padded() * elem_, "LocalSGD compression delta");
            space_->zero(anchor_->data(), anchor_->bytes());
        }
    }
    note_buffers();
    if (initial) set_initial_parameters(initial);
    traffic_at_last_step_ = bytes_sent();
}

std::uint64_t StepEngine::bytes_sent() const {
    // host_comm()'s wrappers report the grid communicator they forward to: not counted again.
    std::vector<const Communicator *> seen;
    std::uint64_t total = 0;
    for (const CommunicatorPtr &c : {grid_.world, grid_.data, grid_.shard, grid_.replica, grid_.tensor}) {
        if (!c || std::find(seen.begin(), seen.end(), c.get()) != seen.end()) continue;
        seen.push_back(c.get());
        total += c->bytes_sent();
    }
    return total + (compressor_ ? compressor_->bytes_sent() : 0);
}

void StepEngine::set_initial_parameters(const void *initial) {
    if (!options_.broadcast_initial || grid_.data->size() == 1) return set_parameters(initial);
    // Every replica starts from rank 0's values, as PyTorch DDP does: ranks that were given
    // different initial values would otherwise drift apart for good.
    const std::size_t count = layout_.element_count();
    std::vector<unsigned char> packed(static_cast<const unsigned char *>(initial),
                                      static_cast<const unsigned char *>(initial) + count * elem_);
    host_comm(*grid_.data).broadcast(packed.data(), count, layout_.dtype(), 0);
    set_parameters(packed.data());
}

StepEngine::~StepEngine() {
    finish_in_flight();
    finish_copies();
    try {
        space_->synchronize(); // passes still reading buffers about to be freed
    } catch (...) { // a failed device: nothing left to wait for
    }
}

void StepEngine::finish_in_flight() noexcept {
    if (compressor_) compressor_->abandon();
    for (auto &progress : buckets_) finish_quietly(progress.work);
    for (auto &work : param_gathers_) finish_quietly(work);
    for (auto &unit : units_) finish_quietly(unit.work);
}

void StepEngine::set_learning_rate(double lr) {
    optimizer_.lr = lr;
    for (auto &u : updates_) u.updater->set_lr(lr);
}

// --- parameters -------------------------------------------------------------------------------
void *StepEngine::parameters() {
    require(!plan_.params_sharded(), ErrorCode::invalid_state,
            "FSDP keeps parameters sharded: use gather(unit) or get_parameters()");
    wait_param_gathers();
    return params_->data();
}

void *StepEngine::tensor_parameters(int t) {
    const auto &tl = layout_.tensor(t);
    if (!plan_.params_sharded()) {
        wait_param_gather(tl.bucket);
        return params_->data() + tl.offset * elem_;
    }
    const Unit &unit = units_[std::size_t(tl.bucket)];
    require(unit.gathered, ErrorCode::invalid_state,
            "tensor '" + tl.name + "' belongs to unit " + std::to_string(tl.bucket) + ", which is not gathered");
    return unit.buffer->data() + (tl.offset - layout_.bucket(tl.bucket).offset) * elem_;
}

SpaceBufferPtr StepEngine::take_unit_buffer() {
    if (!free_unit_buffers_.empty()) {
        SpaceBufferPtr buffer = std::move(free_unit_buffers_.back());
        free_unit_buffers_.pop_back();
        return buffer;
    }
    return space_->allocate(layout_.max_bucket_padded() * elem_, "gathered FSDP unit");
}

void StepEngine::start_gather(int b) {
    Unit &unit = units_[std::size_t(b)];
    unit.buffer = take_unit_buffer();
    unit.gathered = true;
    if (schedule_) run(schedule_->gather(b)); // the shard may have to come from the host first
    else gather_unit(b);
    note_buffers();
}

void StepEngine::gather_unit(int b) {
    const auto &bl = layout_.bucket(b);
    Unit &unit = units_[std::size_t(b)];
    // With the shard on the host, it was copied into its own place in the unit: gathered in place.
    const unsigned char *shard = offload_.params ? unit.buffer->data() + std::size_t(group_rank_) * bl.shard * elem_
                                                 : params_->data() + bl.shard_offset * elem_;
    // The buffer may have been read by the caller's kernels (an earlier unit), and the shard
    // written by the update: both on the compute stream.
    space_->before_collective(*grid_.shard);
    unit.work = grid_.shard->allgather_async(shard, unit.buffer->data(), bl.shard, layout_.dtype());
}

void *StepEngine::gather(int b) {
    const auto &bl = layout_.bucket(b);
    if (!plan_.params_sharded()) {
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

void StepEngine::release(int b) {
    layout_.bucket(b); // range check
    if (!plan_.params_sharded()) return;
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

void StepEngine::release_all_units() {
    for (int b = 0; b < int(units_.size()); ++b) release(b);
    last_gathered_ = -1;
}

void StepEngine::get_parameters(void *packed_host) {
    wait_param_gathers();
    auto *packed = static_cast<unsigned char *>(packed_host);
    std::vector<unsigned char> bucket(layout_.max_bucket_padded() * elem_);
    SpaceBufferPtr gathered;
    if (plan_.params_sharded()) gathered = space_->allocate(layout_.max_bucket_padded() * elem_, "parameter gather");
    std::size_t out = 0;
    for (int b = 0; b < layout_.bucket_count(); ++b) {
        const auto &bl = layout_.bucket(b);
        const unsigned char *full = params_->data() + bl.offset * elem_;
        if (plan_.params_sharded()) {
            const unsigned char *shard = params_->data() + bl.shard_offset * elem_;
            if (offload_.params) { // from the host into its place in the device buffer, gathered in place
                unsigned char *own = gathered->data() + std::size_t(group_rank_) * bl.shard * elem_;
                const CopyMark copied = lanes_->copy_to_device_async(own, shard, bl.shard * elem_);
                lanes_->wait(copied); // before the host shard may change again
                lanes_->compute_waits(copied);
                shard = own;
            }
            space_->before_collective(*grid_.shard);
            grid_.shard->allgather(shard, gathered->data(), bl.shard, layout_.dtype());
            full = gathered->data();
        }
        space_->copy_to_host(packed + out * elem_, full, bl.count * elem_);
        out += bl.count;
    }
}

void StepEngine::set_parameters(const void *packed_host) {
    wait_param_gathers();
    const auto *packed = static_cast<const unsigned char *>(packed_host);
    // The whole resident buffer (full or shard) is composed on the host, padding zeroed, and
    // copied in one transfer.
    std::vector<unsigned char> host(params_->bytes(), 0);
    std::size_t in = 0;
    for (const auto &bl : layout_.buckets()) {
        if (plan_.params_sharded()) {
            const std::size_t begin = std::size_t(group_rank_) * bl.shard;
            const std::size_t end = std::min(bl.count, begin + bl.shard);
            if (begin < end)
                std::memcpy(host.data() + bl.shard_offset * elem_, packed + (in + begin) * elem_, (end - begin) * elem_);
        } else {
            std::memcpy(host.data() + bl.offset * elem_, packed + in * elem_, bl.count * elem_);
        }
        in += bl.count;
    }
    write_params(host.data());
    if (anchor_) {
        space_->copy_from_host(anchor_->data(), host.data(), host.size());
        anchor_synced_ = true; // set_parameters' values are the same on every rank
    }
}

void StepEngine::write_params(const unsigned char *host) {
    if (schedule_) run(schedule_->replace_parameters()); // copies still reading the master weights
    if (offload_.params) {
        std::memcpy(params_->data(), host, params_->bytes());
        return;
    }
    space_->copy_from_host(params_->data(), host, params_->bytes());
    refresh_master();
}

// --- step protocol ------------------------------------------------------------------------------
bool StepEngine::final_micro_step() const { return micro_step_ + 1 >= options_.gradient_accumulation_steps; }

void StepEngine::zero_grad() {
    // Reductions in flight read the buffers about to be reused: finish them first.
    for (int b : reduce_order_) await_reduction(b);
    reduce_order_.clear();
    for (auto &progress : buckets_) progress = BucketProgress{};
    for (auto &s : staging_) s.bucket = -1;
    if (schedule_) schedule_->begin_backward();
}

std::size_t StepEngine::staging_bytes() const {
    std::size_t elements = layout_.max_bucket_padded();
    if (offload_.gradients && plan_.grads_sharded()) { // and the reduce-scatter's output, copied out from there
        std::size_t max_shard = 0;
        for (const auto &bl : layout_.buckets()) max_shard = std::max(max_shard, bl.shard);
        elements += max_shard;
    }
    return elements * elem_;
}

std::size_t StepEngine::buffer_bytes() const {
    std::size_t total = accumulation_ ? accumulation_->bytes() : 0;
    for (const auto &s : staging_) total += s.buffer ? s.buffer->bytes() : 0;
    for (const auto &u : units_) total += u.buffer ? u.buffer->bytes() : 0;
    for (const auto &f : free_unit_buffers_) total += f->bytes();
    return total;
}

void StepEngine::note_buffers() { peak_buffer_bytes_ = std::max(peak_buffer_bytes_, buffer_bytes()); }

int StepEngine::take_staging(int b) {
    for (int i = 0; i < int(staging_.size()); ++i)
        if (staging_[std::size_t(i)].bucket < 0) return i;
    for (int issued : reduce_order_) { // recycle the buffer whose reduction was issued first
        auto &progress = buckets_[std::size_t(issued)];
        if (progress.staging_index >= 0) { // reducing, or (ZeRO-Offload's poll) reduced already
            if (progress.phase == BucketPhase::reducing) complete_reduction(issued);
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

unsigned char *StepEngine::open_bucket(int b) {
    const auto &bl = layout_.bucket(b);
    auto &progress = buckets_[std::size_t(b)];
    if (progress.phase == BucketPhase::reducing || progress.phase == BucketPhase::done)
        throw Error(ErrorCode::invalid_state,
                    "bucket " + std::to_string(b) +
                        " was already marked ready in this micro-step; call zero_grad() to start the next one");
    if (!grads_staged()) {
        unsigned char *region = grads_->data() + bl.offset * elem_;
        if (progress.phase == BucketPhase::idle) space_->zero(region, bl.padded * elem_);
        progress.phase = BucketPhase::open;
        return region;
    }
    if (progress.phase == BucketPhase::idle) {
        const int index = take_staging(b);
        Staging &s = staging_[std::size_t(index)];
        if (!s.buffer) s.buffer = space_->allocate(staging_bytes(), "gradient staging buffer");
        if (!s.read_by_copy.empty()) { // a reduced gradient still being copied to the host out of it
            lanes_->compute_waits(s.read_by_copy);
            s.read_by_copy = CopyMark{};
        }
        space_->zero(s.buffer->data(), bl.padded * elem_);
        s.bucket = b;
        progress.staging_index = index;
        progress.phase = BucketPhase::open;
        note_buffers();
    }
    return staging_[std::size_t(progress.staging_index)].buffer->data();
}

void *StepEngine::bucket_grad(int b) {
    layout_.bucket(b);
    return open_bucket(b);
}

void *StepEngine::grad(int t) {
    const auto &tl = layout_.tensor(t);
    return open_bucket(tl.bucket) + (tl.offset - layout_.bucket(tl.bucket).offset) * elem_;
}

void StepEngine::grad_ready(int b) {
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
    if (schedule_) poll_reductions(); // earlier buckets' gradients to the host as soon as they are reduced
}

void StepEngine::launch_reduction(int b, unsigned char *buffer) {
    const auto &bl = layout_.bucket(b);
    auto &progress = buckets_[std::size_t(b)];
    if (!plan_.reduce_grads()) {
        progress.phase = BucketPhase::done;
        return;
    }
    Communicator &group = *grid_.shard;
    space_->before_collective(group); // after the caller's kernels that wrote the gradients
    if (compressor_) {
        compressor_->start(b, buffer, plan_.grads_sharded() ? grads_->data() + bl.shard_offset * elem_ : nullptr);
        progress.compressed = true;
    } else if (plan_.grads_sharded()) {
        // Offloaded, the shard lands in the staging buffer's output part and goes to the host from there.
        unsigned char *shard = offload_.gradients ? buffer + layout_.max_bucket_padded() * elem_
                                                  : grads_->data() + bl.shard_offset * elem_;
        progress.work = group.reduce_scatter_async(buffer, shard, bl.shard, layout_.dtype(), ReduceOp::avg);
    } else {
        progress.work = group.allreduce_async(buffer, buffer, bl.padded, layout_.dtype(), ReduceOp::avg);
    }
    progress.phase = BucketPhase::reducing;
    reduce_order_.push_back(b);
}

void StepEngine::wait_reductions() {
    for (int b : reduce_order_) {
        auto &progress = buckets_[std::size_t(b)];
        if (progress.phase == BucketPhase::reducing) complete_reduction(b);
        progress.work.reset();
        if (progress.staging_index >= 0) {
            staging_[std::size_t(progress.staging_index)].bucket = -1;
            progress.staging_index = -1;
        }
    }
    reduce_order_.clear();
    if (grid_.replica && plan_.reduce_grads()) { // HSDP: shards averaged across the replica groups
        space_->before_collective(*grid_.replica);
        grid_.replica->allreduce(grads_->data(), grads_->data(), grads_->bytes() / elem_, layout_.dtype(),
                                 ReduceOp::avg);
    }
}

void StepEngine::complete_reduction(int b) {
    await_reduction(b);
    buckets_[std::size_t(b)].phase = BucketPhase::done;
    if (schedule_) run(schedule_->reduction_complete(b));
}

void StepEngine::await_reduction(int b) {
    auto &progress = buckets_[std::size_t(b)];
    if (progress.work) {
        WorkPtr work = std::move(progress.work);
        work->wait();
    }
    if (progress.compressed) {
        progress.compressed = false;
        compressor_->finish(b);
    }
}

unsigned char *StepEngine::grad_at(const OwnedSegment &s) const {
    return grads_->data() + (plan_.grads_sharded() ? s.local : s.flat) * elem_;
}

unsigned char *StepEngine::param_at(const OwnedSegment &s) const {
    return params_->data() + (plan_.params_sharded() ? s.local : s.flat) * elem_;
}

double StepEngine::global_sum_of_squares() {
    std::vector<Span> spans;
    if (!plan_.reduce_grads()) { // LocalSGD: each rank steps on its own gradient
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

void StepEngine::update_and_gather(double clip) {
    const bool gather = plan_.gather_after_step();
    if (gather) param_gathers_.resize(std::size_t(layout_.bucket_count()));
    // Phase 1, every bucket: clip, and start the update (LAMB: its per-tensor statistics).
    const int per_tensor = updates_.empty() ? 0 : updates_.front().updater->tensor_stats();
    std::vector<double> stats(std::size_t(per_tensor) * std::size_t(layout_.tensor_count()), 0.0);
    for (BucketUpdate &u : updates_) {
        std::vector<const void *> grads;
        for (const auto &s : u.segments) {
            if (clip != 1.0) space_->scale(grad_at(s), s.count, layout_.dtype(), clip);
            grads.push_back(grad_at(s));
        }
        u.updater->begin_step(grads, per_tensor > 0 ? stats.data() : nullptr);
    }
    // A tensor split across the group: its statistics are the sum of every rank's part.
    if (per_tensor > 0 && plan_.state_sharded() && group_size_ > 1)
        host_comm(*grid_.shard).allreduce(stats.data(), stats.data(), stats.size(), DType::f64, ReduceOp::sum);
    // Phase 2, bucket by bucket: bucket b's allgather (communicator's stream) runs while bucket
    // b+1 is updated.
    for (int b = 0; b < layout_.bucket_count(); ++b) {
        updates_[std::size_t(b)].updater->apply(per_tensor > 0 ? stats.data() : nullptr);
        if (!gather) continue;
        const auto &bl = layout_.bucket(b);
        unsigned char *bucket = params_->data() + bl.offset * elem_;
        space_->before_collective(*grid_.shard);
        param_gathers_[std::size_t(b)] = grid_.shard->allgather_async(
            bucket + std::size_t(group_rank_) * bl.shard * elem_, bucket, bl.shard, layout_.dtype());
    }
}

void StepEngine::wait_param_gather(int b) {
    if (b < int(param_gathers_.size()) && param_gathers_[std::size_t(b)]) {
        WorkPtr work = std::move(param_gathers_[std::size_t(b)]);
        work->wait();
    }
}

void StepEngine::wait_param_gathers() {
    for (int b = 0; b < int(param_gathers_.size()); ++b) wait_param_gather(b);
}

void StepEngine::average_params() {
    if (compressor_ && anchor_synced_) {
        // What is averaged, compressed, is each replica's change since the last averaging; the
        // anchor is the same on every rank, so the new parameters are too.
        const DType dtype = layout_.dtype();
        for (int b = 0; b < layout_.bucket_count(); ++b) {
            const auto &bl = layout_.bucket(b);
            unsigned char *params = params_->data() + bl.offset * elem_, *anchor = anchor_->data() + bl.offset * elem_;
            std::memcpy(delta_->data(), anchor, bl.padded * elem_);
            space_->scale(delta_->data(), bl.padded, dtype, -1.0);
            space_->add_into(delta_->data(), params, bl.padded, dtype); // delta = params - anchor
            compressor_->start(b, delta_->data(), nullptr);
            compressor_->finish(b);
            std::memcpy(params, anchor, bl.padded * elem_);
            space_->add_into(params, delta_->data(), bl.padded, dtype);
            std::memcpy(anchor, params, bl.padded * elem_);
        }
        return;
    }
    space_->before_collective(*grid_.shard);
    grid_.shard->allreduce(params_->data(), params_->data(), layout_.padded_count(), layout_.dtype(), ReduceOp::avg);
    if (anchor_) { // replicas that did not start from one anchor are averaged once uncompressed
        std::memcpy(anchor_->data(), params_->data(), anchor_->bytes());
        anchor_synced_ = true;
    }
}

StepResult StepEngine::step() {
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

    const double sumsq = offload_.active() ? host_sum_of_squares() : global_sum_of_squares();
    result.grad_norm = std::sqrt(sumsq);
    bool finite = std::isfinite(sumsq);
    if (!plan_.reduce_grads()) // LocalSGD: one rank's NaN must stop every rank's step
        finite = space_->allreduce_scalar(*grid_.world, finite ? 0.0 : 1.0, ReduceOp::max) == 0.0;
    if (!finite && options_.skip_nonfinite) {
        result.skipped_nonfinite = true;
        if (compressor_) compressor_->clear_residuals(); // they hold the non-finite values too
        result.bytes_sent = take_traffic();
        return result;
    }
    double clip = 1.0;
    if (options_.max_grad_norm > 0.0) clip = std::min(1.0, options_.max_grad_norm / (result.grad_norm + 1e-6));
    t0 = Clock::now();
    if (offload_.active()) offload_update(clip);
    else update_and_gather(clip);
    result.update_seconds = seconds_since(t0);
    ++step_count_;
    result.applied = true;
    t0 = Clock::now();
    if (plan_.gather_after_step() && !options_.overlap_param_gather) wait_param_gathers();
    if (plan_.after_update == AfterUpdate::average_params && step_count_ % plan_.average_every == 0) average_params();
    result.post_update_seconds = seconds_since(t0);
    result.bytes_sent = take_traffic();
    return result;
}

std::uint64_t StepEngine::take_traffic() {
    const std::uint64_t now = bytes_sent();
    const std::uint64_t moved = now - traffic_at_last_step_;
    traffic_at_last_step_ = now;
    return moved;
}

ShardedOptimizer::GridPosition StepEngine::grid_position() const noexcept {
    return ShardedOptimizer::GridPosition{grid_.pp_rank, grid_.tp_rank, grid_.dp_rank,
                                          grid_.pp_size, grid_.tp_size, grid_.dp_size};
}

StepResult StepEngine::step_on_packed_gradient(const void *packed_grad) {
    const auto *packed = static_cast<const unsigned char *>(packed_grad);
    zero_grad();
    std::size_t at = 0;
    for (int b = 0; b < layout_.bucket_count(); ++b) {
        const std::size_t count = layout_.bucket(b).count;
        // The copy follows bucket_grad's clearing (on the compute stream for a device space).
        space_->copy_from_host(bucket_grad(b), packed + at * elem_, count * elem_);
        at += count;
        grad_ready(b);
    }
    return step();
}

double StepEngine::allreduce_over_data(double value, ReduceOp op) {
    return space_->allreduce_scalar(*grid_.data, value, op);
}

OptimizeResult StepEngine::optimize(const ModelFunction &model, const OptimizeOptions &options) {
    return training::step_loop(*this, model, options);
}

MemoryStats StepEngine::memory_stats() const {
    MemoryStats m;
    std::size_t state = 0;
    for (const auto &u : updates_) state += u.updater->state_bytes();
    if (offload_.active()) { // what went to the host, and what remains in the space
        (offload_.params ? m.host_params_bytes : m.params_bytes) = params_->bytes();
        m.host_grads_bytes = host_grads_->bytes();
        m.host_optimizer_state_bytes = state + (host_master_ ? host_master_->bytes() : 0);
    } else {
        m.params_bytes = params_->bytes();
        m.optimizer_state_bytes = state;
    }
    m.grads_bytes = grads_ ? grads_->bytes() : 0;
    m.buffer_bytes = buffer_bytes();
    m.peak_buffer_bytes = peak_buffer_bytes_;
    if (compressor_) m.compression_bytes = compressor_->state_bytes();
    for (const auto *b : {&anchor_, &delta_})
        if (*b) m.compression_bytes += (*b)->bytes();
    return m;
}

} // namespace shardopt::engine

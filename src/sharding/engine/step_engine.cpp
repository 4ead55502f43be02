#include "step_engine.hpp"
#include "../../elapsed.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "../../training/synchronous_epoch.hpp"
#include "../compression/compressed_reducer.hpp"
#include "../memory_plan.hpp"
#include "../../optim/rules.hpp"
#include "rank_agreement.hpp"
#include "space_batch_memory.hpp"
#include "shardopt/error.hpp"

namespace shardopt::engine {
namespace {

using Clock = std::chrono::steady_clock;

std::unique_ptr<Space> non_null(std::unique_ptr<Space> space) {
    require(space != nullptr, ErrorCode::invalid_argument, "memory space is null");
    return space;
}

} // namespace

StepEngine::StepEngine(std::unique_ptr<Space> space, CommunicatorPtr comm, ParameterSet layout,
                       const OptimizerOptions &optimizer, const ShardingOptions &options, const void *initial,
                       void *external_params)
    : space_(non_null(std::move(space))), comm_(std::move(comm)), layout_(std::move(layout)), optimizer_(optimizer),
      options_(options), host_comms_(*space_),
      ctx_{*space_, layout_, plan_, grid_, options_, optimizer_, offload_, chunks_, host_comms_} {
    require(comm_ != nullptr, ErrorCode::invalid_argument, "communicator is null");
    validate_sharding_options(options_);
    optimizer_.validate();
    grid_ = HybridGrid::for_options(comm_, options_);
    plan_ = plan_of(options_);
    const int group_size = grid_.shard->size();
    // Host memory has no lanes: there the flags are accepted and mean nothing.
    offload_ = OffloadPlan::of(options_, options_.cpu_offload_optimizer && space_->offload_lanes() != nullptr);
    // Offloaded, the update is the CPU's, which sums LAMB's per-tensor statistics across shards.
    space_->check_supported(layout_.dtype(), optimizer_, plan_.state_sharded() && group_size > 1 && !offload_.active());
    layout_.plan(group_size);
    // Ranks that disagree fail here, all of them, naming the difference (not later, silently).
    require_same_options(host_comms_.of(*grid_.world), optimizer_, options_);
    // Over the data group, whose ranks reduce gradients together (tensor-parallel ranks may
    // hold unevenly split tensors; pipeline stages hold different ones).
    require_same_layout(host_comms_.of(*grid_.data), layout_);
    const int state_slots = Optimizer::create(optimizer_)->state_slots();
    // Refuse up front, with the plan's figures, what cannot fit in host memory: the optimizer's
    // own when its space is host memory, ZeRO-Offload's host side for a device optimizer.
    const MemoryPlan need = memory_plan(state_slots, external_params != nullptr);
    if (space_->host_accessible() || offload_.active())
        require_fits(need, space_->host_accessible() ? HostSide::space : HostSide::offload, ranks_sharing_memory(*comm_),
                     data_strategy_of(options_), layout_.element_count(), optimizer_kind_name(optimizer_.kind));

    params_ = std::make_unique<ParameterStore>(ctx_, external_params, [this] { note_buffers(); });
    grads_ = std::make_unique<GradientBuckets>(ctx_, [this] { note_buffers(); });
    chunks_ = owned_chunks(layout_, grid_.shard->rank());
    update_ = make_update(ctx_, *params_, *grads_, plan_.state_sharded() ? chunks_ : whole_tensors(layout_),
                          state_slots);
    reduction_ = make_reduction(ctx_);
    grads_->connect(*reduction_, *update_);
    note_buffers();
    if (initial) set_initial_parameters(initial);
    traffic_at_last_step_ = bytes_sent();
}

StepEngine::~StepEngine() {
    reduction_->abandon();
    params_->abandon();
    update_->finish_copies();
    try {
        space_->synchronize(); // passes still reading buffers about to be freed
    } catch (...) { // a failed device: nothing left to wait for
    }
}

MemoryPlan StepEngine::memory_plan(int state_slots, bool external_params) const {
    MemoryPlanInputs in;
    in.layout = &layout_;
    in.plan = plan_;
    in.offload = offload_;
    in.options = options_;
    in.shard_rank = grid_.shard->rank();
    in.state_slots = state_slots;
    in.external_params = external_params;
    in.host_of_ranks = grid_.shard->host_of_ranks();
    in.hierarchy_allowed = compression::hierarchy_allowed_here();
    return MemoryPlan::of(in);
}

void StepEngine::set_initial_parameters(const void *initial) {
    if (!options_.broadcast_initial || grid_.data->size() == 1) return set_parameters(initial);
    // Every replica starts from rank 0's values, as PyTorch DDP does: ranks that were given
    // different initial values would otherwise drift apart for good.
    const std::size_t count = layout_.element_count();
    if (!plan_.params_sharded() && space_->host_accessible() && !offload_.params) {
        // Rank 0's packed values broadcast in the buffer where they will rest, then laid out there:
        // creating holds no host copy of the parameters besides the caller's (two before: the
        // packed copy broadcast, then the composed buffer). The same bytes sent, the same values.
        params_->wait_gathers();
        update_->before_params_replaced();
        unsigned char *params = static_cast<unsigned char *>(params_->data());
        std::memcpy(params, initial, count * ctx_.elem());
        host_comms_.of(*grid_.data).broadcast(params, count, layout_.dtype(), 0);
        params_->unpack_in_place();
        update_->after_params_replaced();
        reduction_->params_set(params, params_->bytes());
        return;
    }
    std::vector<unsigned char> packed(static_cast<const unsigned char *>(initial),
                                      static_cast<const unsigned char *>(initial) + count * ctx_.elem());
    host_comms_.of(*grid_.data).broadcast(packed.data(), count, layout_.dtype(), 0);
    set_parameters(packed.data());
}

void StepEngine::set_learning_rate(double lr) {
    optimizer_.lr = lr;
    update_->set_lr(lr);
}

ShardedOptimizer::GridPosition StepEngine::grid_position() const noexcept {
    return ShardedOptimizer::GridPosition{grid_.pp_rank, grid_.tp_rank, grid_.dp_rank,
                                          grid_.pp_size, grid_.tp_size, grid_.dp_size};
}

// --- parameters ---------------------------------------------------------------------------------
void *StepEngine::gather(int b) {
    return params_->gather(b, [this](int unit) { update_->gather_unit(unit); });
}

void StepEngine::set_parameters(const void *packed_host) {
    params_->wait_gathers();
    const std::vector<unsigned char> host = params_->compose(packed_host);
    write_params(host.data());
    reduction_->params_set(host.data(), host.size());
}

void StepEngine::write_params(const unsigned char *host) {
    update_->before_params_replaced(); // copies still reading the host side
    params_->write(host);
    update_->after_params_replaced();
}

// --- the step -----------------------------------------------------------------------------------
bool StepEngine::all_finite(double sum_of_squares) {
    const bool finite = std::isfinite(sum_of_squares);
    if (plan_.reduce_grads()) return finite; // the norm of the reduced gradient: the same on every rank
    // LocalSGD: one rank's NaN must stop every rank's step.
    return space_->allreduce_scalar(*grid_.world, finite ? 0.0 : 1.0, ReduceOp::max) == 0.0;
}

StepResult StepEngine::step() {
    StepResult result;
    params_->wait_gathers(); // the update rewrites shards a previous allgather may still be reading
    grads_->mark_remaining_ready();
    if (!grads_->final_micro_step()) {
        grads_->next_micro_step();
        result.accumulating = true;
        return result;
    }
    auto t0 = Clock::now();
    grads_->wait_reductions();
    result.reduce_wait_seconds = seconds_since(t0);
    params_->release_all_units();
    grads_->end_accumulation();

    const double sumsq = update_->sum_of_squares();
    result.grad_norm = std::sqrt(sumsq);
    if (!all_finite(sumsq) && options_.skip_nonfinite) {
        result.skipped_nonfinite = true;
        reduction_->skipped_step();
        result.bytes_sent = take_traffic();
        return result;
    }
    double clip = 1.0;
    if (options_.max_grad_norm > 0.0) clip = std::min(1.0, options_.max_grad_norm / (result.grad_norm + 1e-6));
    t0 = Clock::now();
    update_->apply(clip);
    result.update_seconds = seconds_since(t0);
    ++step_count_;
    result.applied = true;
    t0 = Clock::now();
    if (plan_.gather_after_step() && !options_.overlap_param_gather) params_->wait_gathers();
    if (plan_.after_update == AfterUpdate::average_params && step_count_ % plan_.average_every == 0)
        reduction_->average_params(params_->data());
    result.post_update_seconds = seconds_since(t0);
    result.bytes_sent = take_traffic();
    return result;
}

StepResult StepEngine::step_on_packed_gradient(const void *packed_grad, bool in_space) {
    const auto *packed = static_cast<const unsigned char *>(packed_grad);
    const std::size_t elem = ctx_.elem();
    zero_grad();
    std::size_t at = 0;
    for (int b = 0; b < layout_.bucket_count(); ++b) {
        const std::size_t count = layout_.bucket(b).count;
        // The copy follows bucket_grad's clearing (on the compute stream for a device space).
        if (in_space)
            space_->copy(bucket_grad(b), packed + at * elem, count * elem);
        else
            space_->copy_from_host(bucket_grad(b), packed + at * elem, count * elem);
        at += count;
        grad_ready(b);
    }
    return step();
}

double StepEngine::allreduce_over_data(double value, ReduceOp op) {
    return space_->allreduce_scalar(*grid_.data, value, op);
}

training::EpochOutcome StepEngine::run_epoch(const training::EpochPlan &plan) {
    const bool in_space = plan.memory->on_device();
    return training::run_synchronous_epoch(plan, *this,
                                           [this, in_space](const void *g) { return step_on_packed_gradient(g, in_space); });
}

std::unique_ptr<training::BatchMemory> StepEngine::batch_memory(bool on_device) {
    if (!on_device) return training::host_batch_memory(*this);
    require(!space_->host_accessible(), ErrorCode::invalid_argument,
            "train: device_batches needs an optimizer in cuda memory (this one keeps its parameters in " +
                std::string(space_->name()) + " memory; leave device_batches off, and the model gets host copies)");
    return space_batch_memory(*space_, *params_, layout_, options_.cuda_stream);
}

// --- what it holds and moves --------------------------------------------------------------------
std::uint64_t StepEngine::bytes_sent() const {
    // host_comms_'s wrappers report the grid communicator they forward to: not counted again.
    std::vector<const Communicator *> seen;
    std::uint64_t total = 0;
    for (const CommunicatorPtr &c : {grid_.world, grid_.data, grid_.shard, grid_.replica, grid_.tensor}) {
        if (!c || std::find(seen.begin(), seen.end(), c.get()) != seen.end()) continue;
        seen.push_back(c.get());
        total += c->bytes_sent();
    }
    return total + reduction_->bytes_sent();
}

std::uint64_t StepEngine::take_traffic() {
    const std::uint64_t now = bytes_sent();
    const std::uint64_t moved = now - traffic_at_last_step_;
    traffic_at_last_step_ = now;
    return moved;
}

void StepEngine::note_buffers() {
    peak_buffer_bytes_ = std::max(peak_buffer_bytes_, grads_->buffer_bytes() + params_->buffer_bytes());
}

MemoryStats StepEngine::memory_stats() const {
    MemoryStats m;
    update_->account(m, params_->bytes());
    m.grads_bytes = grads_->grads_bytes();
    m.buffer_bytes = grads_->buffer_bytes() + params_->buffer_bytes();
    m.peak_buffer_bytes = peak_buffer_bytes_;
    m.compression_bytes = reduction_->state_bytes();
    return m;
}

} // namespace shardopt::engine

// AsyncSgdOptimizer: creation (the checks, the channels, the owner), the parameters and the state
// between sessions. The training loop is async_optimize.cpp, checkpoints async_checkpoint.cpp.
#include <cstring>

#include "../optim/rules.hpp"
#include "../sharding/engine/host_space.hpp"
#include "../sharding/engine/rank_agreement.hpp"
#include "../params/owned_segments.hpp"
#include "../sharding/memory_plan.hpp"
#include "async_state.hpp"
#include "shardopt/error.hpp"
#include "wire.hpp"

namespace shardopt {
namespace {

// What async SGD has no use for must be left at its default: refused by name, not ignored.
void require_async_options(const ShardingOptions &s, const OptimizerOptions &optimizer, int world_size) {
    const ShardingOptions d;
    auto refuse = [](bool ok, const std::string &what) {
        require(ok, ErrorCode::unsupported, "async_sgd: " + what);
    };
    refuse(s.memory == MemorySpace::host, "host memory only (its servers update on the CPU)");
    refuse(!s.compression.enabled(), "gradient compression is not supported (gradients go point to point, whole)");
    refuse(s.max_grad_norm == 0.0,
           "max_grad_norm is not supported (clipping needs the global norm of every update's gradient, "
           "which no owner sees)");
    refuse(s.gradient_accumulation_steps == 1, "gradient_accumulation_steps must be 1 (each step is pushed)");
    refuse(s.overlap_param_gather == d.overlap_param_gather, "overlap_param_gather does not apply");
    refuse(optimizer.kind != OptimizerKind::muon,
           "muon is not supported (its matrices are orthogonalized whole, which no owner of a shard holds)");
    refuse(optimizer.kind != OptimizerKind::adafactor,
           "adafactor is not supported (its factored matrices need sums over every owner's part at every update)");
    refuse(optimizer.state_precision == StatePrecision::full,
           std::string("state_precision ") + state_precision_name(optimizer.state_precision) +
               " is not supported (its servers keep full-precision state): use full");
    refuse(optimizer.kind != OptimizerKind::lamb || world_size == 1,
           "LAMB is not supported on more than one rank (its trust ratio needs whole-tensor norms at every "
           "update, across the owners)");
}

} // namespace

void AsyncSgdOptimizer::State::view_to_packed(void *packed) const {
    gather_packed(layout, nullptr, view.data(), packed);
}

void AsyncSgdOptimizer::State::set_from_packed(const void *packed_raw) {
    const auto *packed = static_cast<const unsigned char *>(packed_raw);
    const std::size_t e = elem();
    std::memset(view.data(), 0, view.size());
    std::size_t in = 0;
    for (const auto &b : layout.buckets()) {
        std::memcpy(view.data() + b.offset * e, packed + in * e, b.count * e);
        in += b.count;
    }
    master_from_view();
}

void AsyncSgdOptimizer::State::master_from_view() {
    const std::size_t e = elem();
    for (const auto &b : layout.buckets())
        std::memcpy(owner->master() + b.shard_offset * e, view.data() + (b.offset + std::size_t(rank()) * b.shard) * e,
                    b.shard * e);
}

std::unique_ptr<AsyncSgdOptimizer> AsyncSgdOptimizer::create(CommunicatorPtr comm, ParameterSet layout,
                                                             const OptimizerOptions &optimizer, int allow_staleness,
                                                             const ShardingOptions &sharding, const void *initial) {
    require(comm != nullptr, ErrorCode::invalid_argument, "communicator is null");
    require(allow_staleness >= 0, ErrorCode::invalid_argument,
            "allowStaleness must be >= 0 (got " + std::to_string(allow_staleness) + ")");
    ShardingOptions options = sharding;
    options.strategy = Strategy::async_sgd;
    options.async_staleness = allow_staleness;
    validate_sharding_options(options);
    optimizer.validate();
    require(layout.tensor_count() > 0, ErrorCode::invalid_argument, "the parameter set has no tensors");
    require_async_options(options, optimizer, comm->size());

    auto state = std::make_unique<State>();
    State &s = *state;
    s.world = std::move(comm);
    s.layout = std::move(layout);
    s.optimizer = optimizer;
    s.sharding = options;
    s.plan = async_sgd_plan();
    s.grid = HybridGrid::flat(s.world);
    s.space = engine::make_host_space(options.update_threads);
    s.space->check_supported(s.layout.dtype(), optimizer, s.size() > 1);
    s.layout.plan(s.size());
    // Ranks that disagree fail here, all of them, naming the difference.
    engine::require_same_options(*s.world, s.optimizer, s.sharding);
    engine::require_same_layout(*s.world, s.layout);
    const int slots = Optimizer::create(s.optimizer)->state_slots();
    require_fits(MemoryPlan::async_sgd(s.layout, s.rank(), slots), HostSide::space, ranks_sharing_memory(*s.world),
                 Strategy::async_sgd, s.layout.element_count(), optimizer_kind_name(s.optimizer.kind));
    s.owner = std::make_unique<async::ShardOwner>(s.layout, s.rank(), s.optimizer, *s.space);
    s.view.resize(s.layout.padded_count() * s.elem());
    s.gradient.resize(s.layout.padded_count() * s.elem());
    s.channels = std::make_unique<async::Channels>(*s.world);
    if (initial) {
        const std::size_t bytes = s.layout.element_count() * s.elem();
        std::vector<unsigned char> packed(static_cast<const unsigned char *>(initial),
                                          static_cast<const unsigned char *>(initial) + bytes);
        // Every replica starts from rank 0's values, as DDP's do.
        if (s.sharding.broadcast_initial && s.size() > 1)
            s.world->broadcast(packed.data(), s.layout.element_count(), s.layout.dtype(), 0);
        s.set_from_packed(packed.data());
    }
    return std::unique_ptr<AsyncSgdOptimizer>(new AsyncSgdOptimizer(std::move(state)));
}

AsyncSgdOptimizer::AsyncSgdOptimizer(std::unique_ptr<State> state) : state_(std::move(state)) {}
AsyncSgdOptimizer::~AsyncSgdOptimizer() = default;

int AsyncSgdOptimizer::rank() const noexcept { return state_->rank(); }
int AsyncSgdOptimizer::world_size() const noexcept { return state_->size(); }
int AsyncSgdOptimizer::staleness() const noexcept { return state_->staleness(); }
const ShardingOptions &AsyncSgdOptimizer::options() const noexcept { return state_->sharding; }
const ParameterSet &AsyncSgdOptimizer::layout() const noexcept { return state_->layout; }
const OptimizerOptions &AsyncSgdOptimizer::optimizer_options() const noexcept { return state_->optimizer; }
std::int64_t AsyncSgdOptimizer::step_count() const noexcept { return state_->step_count; }
Communicator &AsyncSgdOptimizer::communicator() noexcept { return *state_->world; }
const AsyncSgdStats &AsyncSgdOptimizer::stats() const noexcept { return state_->stats; }

void AsyncSgdOptimizer::State::set_lr(double lr) {
    optimizer.lr = lr;
    owner->set_lr(lr);
}

void AsyncSgdOptimizer::set_learning_rate(double lr) {
    OptimizerOptions changed = state_->optimizer;
    changed.lr = lr;
    changed.validate();
    state_->set_lr(lr);
}

void *AsyncSgdOptimizer::parameters() { return state_->view.data(); }

void AsyncSgdOptimizer::get_parameters(void *packed) {
    require(packed != nullptr, ErrorCode::invalid_argument, "get_parameters: null buffer");
    state_->view_to_packed(packed);
}

void AsyncSgdOptimizer::set_parameters(const void *packed) {
    require(packed != nullptr, ErrorCode::invalid_argument, "set_parameters: null buffer");
    state_->set_from_packed(packed);
}

void AsyncSgdOptimizer::synchronize_optimizer_state() {
    State &s = *state_;
    engine::require_agreement(*s.world,
                              {engine::fact("the step count", s.step_count),
                               engine::fact("the parameter layout", std::int64_t(s.layout.fingerprint() >> 1)),
                               engine::fact("the optimizer kind", std::int64_t(s.optimizer.kind)),
                               engine::fact("the learning rate", s.optimizer.lr)},
                              "synchronize_optimizer_state");
    // The views are replicas of the owners' shards: made rank 0's (the owners' state is sharded).
    s.world->broadcast(s.view.data(), s.layout.padded_count(), s.layout.dtype(), 0);
    s.master_from_view();
}

bool AsyncSgdOptimizer::State::early_stop_vote(bool local_vote) {
    double vote = local_vote ? 1.0 : 0.0, any = 0.0;
    world->allreduce(&vote, &any, 1, DType::f64, ReduceOp::max);
    return any != 0.0;
}

bool AsyncSgdOptimizer::should_early_stop(bool local_vote) { return state_->early_stop_vote(local_vote); }

MemoryStats AsyncSgdOptimizer::memory_stats() const {
    const State &s = *state_;
    MemoryStats m;
    m.params_bytes = s.view.size() + s.owner->shard_bytes(); // the view and the master shard
    m.grads_bytes = s.gradient.size();
    m.optimizer_state_bytes = s.owner->state_bytes();
    // A session's message buffers, as the memory plan counts them (a session holds them while it runs).
    m.buffer_bytes = async_sgd_message_bytes(s.owner->shard_bytes(), s.size());
    m.peak_buffer_bytes = m.buffer_bytes;
    return m;
}

std::uint64_t AsyncSgdOptimizer::bytes_sent() const { return state_->world->bytes_sent() + state_->channels->bytes_sent(); }

} // namespace shardopt

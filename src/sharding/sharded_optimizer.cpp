// ShardedOptimizer front end: validation of the caller's requests, then the engine.
#include <cstring>

#include "shardopt/error.hpp"
#include "memory_plan.hpp"
#include "sharded_optimizer_impl.hpp"

namespace shardopt {

const char *strategy_name(Strategy strategy) noexcept {
    switch (strategy) {
    case Strategy::ddp: return "ddp";
    case Strategy::zero1: return "zero1";
    case Strategy::zero2: return "zero2";
    case Strategy::fsdp: return "fsdp";
    case Strategy::hybrid: return "hybrid";
    case Strategy::local_sgd: return "local_sgd";
    }
    return "invalid-strategy";
}


ShardedOptimizer::ShardedOptimizer(CommunicatorPtr comm, ParameterSet layout, const OptimizerOptions &optimizer,
                                   const ShardingOptions &options)
    : comm_(std::move(comm)), layout_(std::move(layout)), optimizer_(Optimizer::create(optimizer)),
      options_(options) {}

ShardedOptimizer::~ShardedOptimizer() {
    // Collectives in flight read and write our buffers: let them finish first.
    if (impl_) impl_->finish_in_flight();
}

std::unique_ptr<ShardedOptimizer> ShardedOptimizer::create(CommunicatorPtr comm, ParameterSet layout,
                                                           const OptimizerOptions &optimizer,
                                                           const ShardingOptions &options, const void *initial,
                                                           void *external_params) {
    require(comm != nullptr, ErrorCode::invalid_argument, "communicator is null");
    validate_sharding_options(options);
    HybridGrid grid = HybridGrid::for_options(comm, options);
    const Strategy data_strategy = data_strategy_of(options);
    layout.plan(grid.shard->size());
    std::unique_ptr<ShardedOptimizer> opt(new ShardedOptimizer(comm, std::move(layout), optimizer, options));
    const StrategyPlan plan = StrategyPlan::of(data_strategy, options);
    require_fits(MemoryPlan::of(plan, opt->layout_, opt->optimizer_->state_slots(), options, external_params != nullptr),
                 ranks_sharing_memory(*comm), data_strategy, opt->layout_.element_count(),
                 optimizer_kind_name(optimizer.kind));
    opt->impl_ = std::make_unique<Impl>(*opt, std::move(grid), plan, external_params);
    if (initial) opt->set_parameters(initial);
    return opt;
}

int ShardedOptimizer::rank() const noexcept { return comm_->rank(); }
int ShardedOptimizer::world_size() const noexcept { return comm_->size(); }

ShardedOptimizer::GridPosition ShardedOptimizer::grid_position() const noexcept {
    const HybridGrid &g = impl_->grid;
    return GridPosition{g.pp_rank, g.tp_rank, g.dp_rank, g.pp_size, g.tp_size, g.dp_size};
}
CommunicatorPtr ShardedOptimizer::data_group() const noexcept { return impl_->grid.data; }
CommunicatorPtr ShardedOptimizer::tensor_group() const noexcept { return impl_->grid.tensor; }
CommunicatorPtr ShardedOptimizer::pipeline_group() const noexcept { return impl_->grid.pipeline; }

void *ShardedOptimizer::parameters() {
    require(!impl_->plan.params_sharded, ErrorCode::invalid_state,
            "FSDP keeps parameters sharded: use gather(unit) or get_parameters()");
    impl_->wait_param_gathers();
    return impl_->params;
}

void *ShardedOptimizer::tensor_parameters(int t) {
    const auto &tl = layout_.tensor(t);
    if (!impl_->plan.params_sharded) {
        impl_->wait_param_gather(tl.bucket);
        return impl_->params + tl.offset * impl_->elem;
    }
    const auto &unit = impl_->units[tl.bucket];
    require(unit.gathered, ErrorCode::invalid_state,
            "tensor '" + tl.name + "' belongs to unit " + std::to_string(tl.bucket) + ", which is not gathered");
    return const_cast<unsigned char *>(unit.buffer.data()) + (tl.offset - layout_.bucket(tl.bucket).offset) * impl_->elem;
}

void ShardedOptimizer::get_parameters(void *packed) {
    require(packed != nullptr, ErrorCode::invalid_argument, "get_parameters: null buffer");
    impl_->get_parameters(packed);
}

void ShardedOptimizer::set_parameters(const void *packed) {
    require(packed != nullptr, ErrorCode::invalid_argument, "set_parameters: null buffer");
    impl_->set_parameters(packed);
}

void *ShardedOptimizer::gather(int bucket) {
    layout_.bucket(bucket);
    return impl_->gather(bucket);
}

void ShardedOptimizer::release(int bucket) { impl_->release(bucket); }

void ShardedOptimizer::zero_grad() { impl_->start_micro_step(); }

void *ShardedOptimizer::bucket_grad(int bucket) {
    layout_.bucket(bucket);
    return impl_->bucket_grad(bucket);
}

void *ShardedOptimizer::grad(int tensor) {
    const auto &tl = layout_.tensor(tensor);
    unsigned char *base = impl_->bucket_grad(tl.bucket);
    return base + (tl.offset - layout_.bucket(tl.bucket).offset) * impl_->elem;
}

void ShardedOptimizer::grad_ready(int bucket) {
    layout_.bucket(bucket);
    impl_->grad_ready(bucket);
}

StepResult ShardedOptimizer::step() { return impl_->step(); }

void ShardedOptimizer::synchronize_optimizer_state() { impl_->synchronize_state(); }

bool ShardedOptimizer::should_early_stop(bool local_vote) {
    int32_t vote = local_vote ? 1 : 0;
    impl_->grid.world->allreduce(&vote, &vote, 1, DType::i32, ReduceOp::max);
    return vote != 0;
}

MemoryStats ShardedOptimizer::memory_stats() const {
    MemoryStats m;
    const std::size_t elem = impl_->elem;
    m.params_bytes = (impl_->plan.params_sharded ? layout_.shard_count() : layout_.padded_count()) * elem;
    m.grads_bytes = impl_->grads.size();
    for (const auto &s : impl_->state) m.optimizer_state_bytes += s.size();
    m.buffer_bytes = impl_->buffer_bytes();
    m.peak_buffer_bytes = impl_->peak_buffer_bytes;
    return m;
}

} // namespace shardopt

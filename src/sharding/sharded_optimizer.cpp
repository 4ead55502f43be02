// ShardedOptimizer: the public front of the one step engine (engine/step_engine.hpp) over the
// memory space the options choose, or, for strategy async_sgd, of an AsyncSgdOptimizer (src/async),
// which trains through optimize() on its own threads instead of the step protocol.
#include "shardopt/sharded_optimizer.hpp"

#include "../training/optimize_options.hpp"

#include "engine/cuda_space.hpp"
#include "engine/host_space.hpp"
#include "engine/step_engine.hpp"
#include "hybrid_grid.hpp"
#include "sharding_configuration.hpp"
#include "shardopt/async_sgd.hpp"
#include "shardopt/error.hpp"

namespace shardopt {
namespace {

[[noreturn]] void no_step_protocol(const char *call) {
    throw Error(ErrorCode::unsupported,
                std::string(call) + ": the async_sgd strategy trains through optimize() (its workers and parameter "
                                    "servers run their own clock), not the step protocol");
}

} // namespace

ShardedOptimizer::ShardedOptimizer(std::unique_ptr<engine::StepEngine> engine) : engine_(std::move(engine)) {
    require(engine_ != nullptr, ErrorCode::invalid_argument, "engine is null");
}

ShardedOptimizer::ShardedOptimizer(std::unique_ptr<AsyncSgdOptimizer> async) : async_(std::move(async)) {
    require(async_ != nullptr, ErrorCode::invalid_argument, "asynchronous optimizer is null");
}

ShardedOptimizer::~ShardedOptimizer() = default;

std::unique_ptr<ShardedOptimizer> ShardedOptimizer::create(CommunicatorPtr comm, ParameterSet layout,
                                                           const OptimizerOptions &optimizer,
                                                           const ShardingOptions &sharding, const void *initial,
                                                           void *external_params) {
    require(comm != nullptr, ErrorCode::invalid_argument, "communicator is null");
    ResolvedConfiguration resolved = resolve_configuration(std::move(layout), optimizer, sharding);
    const ShardingOptions &options = resolved.sharding;
    validate_sharding_options(options);
    if (options.strategy == Strategy::async_sgd) {
        require(external_params == nullptr, ErrorCode::unsupported,
                "caller-owned parameters are not supported for async_sgd (DDP, ZeRO-1, ZeRO-2 and Local SGD only)");
        return std::unique_ptr<ShardedOptimizer>(new ShardedOptimizer(AsyncSgdOptimizer::create(
            std::move(comm), std::move(resolved.layout), resolved.optimizer, options.async_staleness, options, initial)));
    }
    std::unique_ptr<engine::Space> space = options.memory == MemorySpace::cuda
                                               ? engine::make_cuda_space(*comm, options.cuda_stream, options.update_threads)
                                               : engine::make_host_space(options.update_threads);
    return std::unique_ptr<ShardedOptimizer>(new ShardedOptimizer(std::make_unique<engine::StepEngine>(
        std::move(space), std::move(comm), std::move(resolved.layout), resolved.optimizer, options, initial,
        external_params)));
}

int ShardedOptimizer::rank() const noexcept { return async_ ? async_->rank() : engine_->world().rank(); }
int ShardedOptimizer::world_size() const noexcept { return async_ ? async_->world_size() : engine_->world().size(); }
const ShardingOptions &ShardedOptimizer::options() const noexcept {
    return async_ ? async_->options() : engine_->options();
}
const ParameterSet &ShardedOptimizer::layout() const noexcept { return async_ ? async_->layout() : engine_->layout(); }
const OptimizerOptions &ShardedOptimizer::optimizer_options() const noexcept {
    return async_ ? async_->optimizer_options() : engine_->optimizer_options();
}
void ShardedOptimizer::set_learning_rate(double lr) {
    if (async_) return async_->set_learning_rate(lr);
    engine_->set_lr(lr);
}
std::int64_t ShardedOptimizer::step_count() const noexcept {
    return async_ ? async_->step_count() : engine_->step_count();
}
Communicator &ShardedOptimizer::communicator() noexcept { return async_ ? async_->communicator() : engine_->world(); }

ShardedOptimizer::GridPosition ShardedOptimizer::grid_position() const noexcept {
    if (async_) return GridPosition{0, 0, async_->rank(), 1, 1, async_->world_size()};
    const HybridGrid &g = engine_->grid();
    return GridPosition{g.pp_rank, g.tp_rank, g.dp_rank, g.pp_size, g.tp_size, g.dp_size};
}
CommunicatorPtr ShardedOptimizer::data_group() const noexcept {
    return async_ ? async_->communicator().shared_from_this() : engine_->grid().data;
}
CommunicatorPtr ShardedOptimizer::tensor_group() const noexcept { return async_ ? nullptr : engine_->grid().tensor; }
CommunicatorPtr ShardedOptimizer::pipeline_group() const noexcept {
    return async_ ? nullptr : engine_->grid().pipeline;
}

void *ShardedOptimizer::parameters() { return async_ ? async_->parameters() : engine_->parameters(); }
void *ShardedOptimizer::tensor_parameters(int t) {
    if (!async_) return engine_->tensor_parameters(t);
    const auto &tl = async_->layout().tensor(t);
    return static_cast<unsigned char *>(async_->parameters()) + tl.offset * async_->layout().element_size();
}
void ShardedOptimizer::get_parameters(void *packed) {
    if (async_) return async_->get_parameters(packed);
    engine_->get_parameters(packed);
}
void ShardedOptimizer::set_parameters(const void *packed) {
    if (async_) return async_->set_parameters(packed);
    engine_->set_parameters(packed);
}
void *ShardedOptimizer::gather(int bucket) {
    if (!async_) return engine_->gather(bucket);
    const auto &bl = async_->layout().bucket(bucket);
    return static_cast<unsigned char *>(async_->parameters()) + bl.offset * async_->layout().element_size();
}
void ShardedOptimizer::release(int bucket) {
    if (async_) {
        async_->layout().bucket(bucket); // range check
        return;
    }
    engine_->release(bucket);
}

void ShardedOptimizer::zero_grad() {
    if (async_) no_step_protocol("zero_grad");
    engine_->zero_grad();
}
void *ShardedOptimizer::bucket_grad(int bucket) {
    if (async_) no_step_protocol("bucket_grad");
    return engine_->bucket_grad(bucket);
}
void *ShardedOptimizer::grad(int tensor) {
    if (async_) no_step_protocol("grad");
    return engine_->grad(tensor);
}
void ShardedOptimizer::grad_ready(int bucket) {
    if (async_) no_step_protocol("grad_ready");
    engine_->grad_ready(bucket);
}
StepResult ShardedOptimizer::step() {
    if (async_) no_step_protocol("step");
    return engine_->step();
}

void ShardedOptimizer::synchronize_optimizer_state() {
    if (async_) return async_->synchronize_optimizer_state();
    engine_->synchronize_state();
}
bool ShardedOptimizer::should_early_stop(bool local_vote) {
    return async_ ? async_->should_early_stop(local_vote) : engine_->should_early_stop(local_vote);
}
MemoryStats ShardedOptimizer::memory_stats() const { return async_ ? async_->memory_stats() : engine_->memory_stats(); }
std::uint64_t ShardedOptimizer::bytes_sent() const { return async_ ? async_->bytes_sent() : engine_->traffic(); }
TrainingResult ShardedOptimizer::train(const BatchFunction &model, const TrainingOptions &options) {
    return async_ ? async_->train(model, options) : engine_->train(model, options);
}
OptimizeResult ShardedOptimizer::optimize(const ModelFunction &model, const OptimizeOptions &options) {
    return training::optimize_result_of(
        train(training::batch_function_of(model), training::training_options_of(options)));
}

void ShardedOptimizer::save(const std::string &dir, CheckpointForm form) {
    if (async_) return async_->save(dir, form);
    engine_->save(dir, form);
}
std::unique_ptr<AsyncCheckpoint> ShardedOptimizer::save_async(const std::string &dir) {
    if (async_)
        throw Error(ErrorCode::unsupported, "save_async: asynchronous SGD checkpoints with save() (its owners hold "
                                            "state that a step-boundary snapshot would miss)");
    return engine_->save_async(dir);
}
void ShardedOptimizer::load(const std::string &dir) {
    if (async_) return async_->load(dir);
    engine_->load(dir);
}
std::vector<unsigned char> ShardedOptimizer::serialize() { return async_ ? async_->serialize() : engine_->serialize(); }
void ShardedOptimizer::deserialize(const void *data, std::size_t size) {
    if (async_) return async_->deserialize(data, size);
    engine_->deserialize(data, size);
}

} // namespace shardopt

// ShardedOptimizer: the public front of one OptimizerBackend (optimizer_backend.hpp), the step
// engine over the memory space the options choose (engine/step_engine.hpp) or, for strategy
// async_sgd, asynchronous SGD (src/async). The checks every backend shares run here, once.
#include "shardopt/sharded_optimizer.hpp"

#include "../training/optimize_options.hpp"
#include "../training/trainer.hpp"
#include "engine/cuda_space.hpp"
#include "engine/host_space.hpp"
#include "engine/step_engine.hpp"
#include "optimizer_backend.hpp"
#include "sharding_configuration.hpp"
#include "shardopt/error.hpp"
#include "strategies/strategy_plan.hpp"

namespace shardopt {

ShardedOptimizer::ShardedOptimizer(std::unique_ptr<OptimizerBackend> backend) : backend_(std::move(backend)) {
    require(backend_ != nullptr, ErrorCode::invalid_argument, "optimizer backend is null");
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
    std::unique_ptr<OptimizerBackend> backend;
    if (options.strategy == Strategy::async_sgd) {
        require(external_params == nullptr, ErrorCode::unsupported,
                "caller-owned parameters are not supported for async_sgd (DDP, ZeRO-1, ZeRO-2 and Local SGD only)");
        backend = make_async_sgd_backend(std::move(comm), std::move(resolved.layout), resolved.optimizer, options,
                                         initial);
    } else {
        std::unique_ptr<engine::Space> space =
            options.memory == MemorySpace::cuda ? engine::make_cuda_space(*comm, options.cuda_stream, options.update_threads)
                                                : engine::make_host_space(options.update_threads);
        backend = std::make_unique<engine::StepEngine>(std::move(space), std::move(comm), std::move(resolved.layout),
                                                       resolved.optimizer, options, initial, external_params);
    }
    return std::unique_ptr<ShardedOptimizer>(new ShardedOptimizer(std::move(backend)));
}

int ShardedOptimizer::rank() const noexcept { return backend_->communicator().rank(); }
int ShardedOptimizer::world_size() const noexcept { return backend_->communicator().size(); }
const ShardingOptions &ShardedOptimizer::options() const noexcept { return backend_->options(); }
const ParameterSet &ShardedOptimizer::layout() const noexcept { return backend_->layout(); }
const OptimizerOptions &ShardedOptimizer::optimizer_options() const noexcept { return backend_->optimizer_options(); }
void ShardedOptimizer::set_learning_rate(double lr) {
    OptimizerOptions changed = backend_->optimizer_options();
    changed.lr = lr;
    changed.validate();
    backend_->set_learning_rate(lr);
}
std::int64_t ShardedOptimizer::step_count() const noexcept { return backend_->step_count(); }
Communicator &ShardedOptimizer::communicator() noexcept { return backend_->communicator(); }

ShardedOptimizer::GridPosition ShardedOptimizer::grid_position() const noexcept { return backend_->grid_position(); }
CommunicatorPtr ShardedOptimizer::data_group() const noexcept { return backend_->data_group(); }
CommunicatorPtr ShardedOptimizer::tensor_group() const noexcept { return backend_->tensor_group(); }
CommunicatorPtr ShardedOptimizer::pipeline_group() const noexcept { return backend_->pipeline_group(); }

void *ShardedOptimizer::parameters() { return backend_->parameters(); }
void *ShardedOptimizer::tensor_parameters(int t) { return backend_->tensor_parameters(t); }
void ShardedOptimizer::get_parameters(void *packed) {
    require(packed != nullptr, ErrorCode::invalid_argument, "get_parameters: null buffer");
    backend_->get_parameters(packed);
}
void ShardedOptimizer::set_parameters(const void *packed) {
    require(packed != nullptr, ErrorCode::invalid_argument, "set_parameters: null buffer");
    backend_->set_parameters(packed);
}
void *ShardedOptimizer::gather(int bucket) { return backend_->gather(bucket); }
void ShardedOptimizer::release(int bucket) { backend_->release(bucket); }

void ShardedOptimizer::zero_grad() { backend_->zero_grad(); }
void *ShardedOptimizer::bucket_grad(int bucket) { return backend_->bucket_grad(bucket); }
void *ShardedOptimizer::grad(int tensor) { return backend_->grad(tensor); }
void ShardedOptimizer::grad_ready(int bucket) { backend_->grad_ready(bucket); }
StepResult ShardedOptimizer::step() { return backend_->step(); }

void ShardedOptimizer::synchronize_optimizer_state() { backend_->synchronize_optimizer_state(); }
bool ShardedOptimizer::should_early_stop(bool local_vote) { return backend_->should_early_stop(local_vote); }
MemoryStats ShardedOptimizer::memory_stats() const { return backend_->memory_stats(); }
std::uint64_t ShardedOptimizer::bytes_sent() const { return backend_->bytes_sent(); }
TrainingResult ShardedOptimizer::train(const BatchFunction &model, const TrainingOptions &options) {
    require(bool(model), ErrorCode::invalid_argument, "train: the model is null");
    options.validate();
    return training::train(*backend_, model, options);
}
OptimizeResult ShardedOptimizer::optimize(const ModelFunction &model, const OptimizeOptions &options) {
    training::check_optimize_options(model, options);
    return training::optimize_result_of(
        train(training::batch_function_of(model), training::training_options_of(options)));
}
AsyncSgdOptimizer *ShardedOptimizer::async_sgd() noexcept { return backend_->async_sgd(); }

void ShardedOptimizer::save(const std::string &dir, CheckpointForm form) { backend_->save(dir, form); }
std::unique_ptr<AsyncCheckpoint> ShardedOptimizer::save_async(const std::string &dir) {
    return backend_->save_async(dir);
}
void ShardedOptimizer::load(const std::string &dir) { backend_->load(dir); }
std::vector<unsigned char> ShardedOptimizer::serialize() { return backend_->serialize(); }
void ShardedOptimizer::serialize(const ByteWriter &write) { backend_->serialize(write); }
void ShardedOptimizer::deserialize(const void *data, std::size_t size) { backend_->deserialize(data, size); }

} // namespace shardopt

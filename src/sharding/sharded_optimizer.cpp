// ShardedOptimizer: the public front of the one step engine (engine/step_engine.hpp) over the
// memory space the options choose.
#include "shardopt/sharded_optimizer.hpp"

#include "engine/cuda_space.hpp"
#include "engine/host_space.hpp"
#include "engine/step_engine.hpp"
#include "shardopt/error.hpp"

namespace shardopt {

ShardedOptimizer::ShardedOptimizer(std::unique_ptr<engine::StepEngine> engine) : engine_(std::move(engine)) {
    require(engine_ != nullptr, ErrorCode::invalid_argument, "engine is null");
}

ShardedOptimizer::~ShardedOptimizer() = default;

std::unique_ptr<ShardedOptimizer> ShardedOptimizer::create(CommunicatorPtr comm, ParameterSet layout,
                                                           const OptimizerOptions &optimizer,
                                                           const ShardingOptions &options, const void *initial,
                                                           void *external_params) {
    require(comm != nullptr, ErrorCode::invalid_argument, "communicator is null");
    validate_sharding_options(options);
    std::unique_ptr<engine::Space> space = options.memory == MemorySpace::cuda
                                               ? engine::make_cuda_space(*comm, options.cuda_stream, options.update_threads)
                                               : engine::make_host_space(options.update_threads);
    return std::unique_ptr<ShardedOptimizer>(new ShardedOptimizer(std::make_unique<engine::StepEngine>(
        std::move(space), std::move(comm), std::move(layout), optimizer, options, initial, external_params)));
}

int ShardedOptimizer::rank() const noexcept { return engine_->world().rank(); }
int ShardedOptimizer::world_size() const noexcept { return engine_->world().size(); }
const ShardingOptions &ShardedOptimizer::options() const noexcept { return engine_->options(); }
const ParameterSet &ShardedOptimizer::layout() const noexcept { return engine_->layout(); }
const OptimizerOptions &ShardedOptimizer::optimizer_options() const noexcept { return engine_->optimizer_options(); }
void ShardedOptimizer::set_learning_rate(double lr) { engine_->set_lr(lr); }
std::int64_t ShardedOptimizer::step_count() const noexcept { return engine_->step_count(); }
Communicator &ShardedOptimizer::communicator() noexcept { return engine_->world(); }

ShardedOptimizer::GridPosition ShardedOptimizer::grid_position() const noexcept {
    const HybridGrid &g = engine_->grid();
    return GridPosition{g.pp_rank, g.tp_rank, g.dp_rank, g.pp_size, g.tp_size, g.dp_size};
}
CommunicatorPtr ShardedOptimizer::data_group() const noexcept { return engine_->grid().data; }
CommunicatorPtr ShardedOptimizer::tensor_group() const noexcept { return engine_->grid().tensor; }
CommunicatorPtr ShardedOptimizer::pipeline_group() const noexcept { return engine_->grid().pipeline; }

void *ShardedOptimizer::parameters() { return engine_->parameters(); }
void *ShardedOptimizer::tensor_parameters(int t) { return engine_->tensor_parameters(t); }
void ShardedOptimizer::get_parameters(void *packed) { engine_->get_parameters(packed); }
void ShardedOptimizer::set_parameters(const void *packed) { engine_->set_parameters(packed); }
void *ShardedOptimizer::gather(int bucket) { return engine_->gather(bucket); }
void ShardedOptimizer::release(int bucket) { engine_->release(bucket); }

void ShardedOptimizer::zero_grad() { engine_->zero_grad(); }
void *ShardedOptimizer::bucket_grad(int bucket) { return engine_->bucket_grad(bucket); }
void *ShardedOptimizer::grad(int tensor) { return engine_->grad(tensor); }
void ShardedOptimizer::grad_ready(int bucket) { engine_->grad_ready(bucket); }
StepResult ShardedOptimizer::step() { return engine_->step(); }

void ShardedOptimizer::synchronize_optimizer_state() { engine_->synchronize_state(); }
bool ShardedOptimizer::should_early_stop(bool local_vote) { return engine_->should_early_stop(local_vote); }
MemoryStats ShardedOptimizer::memory_stats() const { return engine_->memory_stats(); }
std::uint64_t ShardedOptimizer::bytes_sent() const { return engine_->traffic(); }
OptimizeResult ShardedOptimizer::optimize(const ModelFunction &model, const OptimizeOptions &options) {
    return engine_->optimize(model, options);
}

void ShardedOptimizer::save(const std::string &dir, CheckpointForm form) { engine_->save(dir, form); }
std::unique_ptr<AsyncCheckpoint> ShardedOptimizer::save_async(const std::string &dir) {
    return engine_->save_async(dir);
}
void ShardedOptimizer::load(const std::string &dir) { engine_->load(dir); }
std::vector<unsigned char> ShardedOptimizer::serialize() { return engine_->serialize(); }
void ShardedOptimizer::deserialize(const void *data, std::size_t size) { engine_->deserialize(data, size); }

} // namespace shardopt

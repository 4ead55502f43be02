// ShardedDeviceOptimizer: the public face of the device engine.
#include "shardopt/cuda_sharded_optimizer.hpp"

#include "cuda_space.hpp"
#include "device_engine.hpp"
#include "shardopt/error.hpp"

namespace shardopt::cuda {

ShardedDeviceOptimizer::ShardedDeviceOptimizer(std::unique_ptr<device::DeviceEngine> engine)
    : engine_(std::move(engine)) {}

ShardedDeviceOptimizer::~ShardedDeviceOptimizer() = default;

std::unique_ptr<ShardedDeviceOptimizer> ShardedDeviceOptimizer::create(CommunicatorPtr comm, ParameterSet layout,
                                                                       const OptimizerOptions &optimizer,
                                                                       const ShardingOptions &options,
                                                                       const void *initial, Stream stream) {
    require(comm != nullptr, ErrorCode::invalid_argument, "communicator is null");
    auto space = device::make_cuda_space(*comm, stream); // before comm is moved from
    return create_in(std::move(space), std::move(comm), std::move(layout), optimizer, options, initial);
}

std::unique_ptr<ShardedDeviceOptimizer> ShardedDeviceOptimizer::create_in(std::unique_ptr<device::DeviceSpace> space,
                                                                          CommunicatorPtr comm, ParameterSet layout,
                                                                          const OptimizerOptions &optimizer,
                                                                          const ShardingOptions &options,
                                                                          const void *initial) {
    auto engine = std::make_unique<device::DeviceEngine>(std::move(space), std::move(comm), std::move(layout),
                                                         optimizer, options, initial);
    return std::unique_ptr<ShardedDeviceOptimizer>(new ShardedDeviceOptimizer(std::move(engine)));
}

int ShardedDeviceOptimizer::rank() const noexcept { return engine_->world().rank(); }
int ShardedDeviceOptimizer::world_size() const noexcept { return engine_->world().size(); }
const ParameterSet &ShardedDeviceOptimizer::layout() const noexcept { return engine_->layout(); }
const ShardingOptions &ShardedDeviceOptimizer::options() const noexcept { return engine_->options(); }
std::int64_t ShardedDeviceOptimizer::step_count() const noexcept { return engine_->step_count(); }
void ShardedDeviceOptimizer::set_learning_rate(double lr) { engine_->set_lr(lr); }

ShardedOptimizer::GridPosition ShardedDeviceOptimizer::grid_position() const noexcept {
    const HybridGrid &g = engine_->grid();
    return ShardedOptimizer::GridPosition{g.pp_rank, g.tp_rank, g.dp_rank, g.pp_size, g.tp_size, g.dp_size};
}
CommunicatorPtr ShardedDeviceOptimizer::tensor_group() const noexcept { return engine_->grid().tensor; }
CommunicatorPtr ShardedDeviceOptimizer::pipeline_group() const noexcept { return engine_->grid().pipeline; }

void *ShardedDeviceOptimizer::parameters() { return engine_->parameters(); }
void *ShardedDeviceOptimizer::tensor_parameters(int t) { return engine_->tensor_parameters(t); }
void *ShardedDeviceOptimizer::gather(int bucket) { return engine_->gather(bucket); }
void ShardedDeviceOptimizer::release(int bucket) { engine_->release(bucket); }
void ShardedDeviceOptimizer::get_parameters(void *packed_host) { engine_->get_parameters(packed_host); }
void ShardedDeviceOptimizer::set_parameters(const void *packed_host) { engine_->set_parameters(packed_host); }

void ShardedDeviceOptimizer::zero_grad() { engine_->zero_grad(); }
void *ShardedDeviceOptimizer::bucket_grad(int bucket) { return engine_->bucket_grad(bucket); }
void *ShardedDeviceOptimizer::grad(int tensor) { return engine_->grad(tensor); }
void ShardedDeviceOptimizer::grad_ready(int bucket) { engine_->grad_ready(bucket); }
StepResult ShardedDeviceOptimizer::step() { return engine_->step(); }

MemoryStats ShardedDeviceOptimizer::memory_stats() const { return engine_->memory_stats(); }

void ShardedDeviceOptimizer::synchronize_optimizer_state() { engine_->synchronize_state(); }
bool ShardedDeviceOptimizer::should_early_stop(bool local_vote) { return engine_->should_early_stop(local_vote); }
OptimizeResult ShardedDeviceOptimizer::optimize(const ModelFunction &model, const OptimizeOptions &options) {
    return engine_->optimize(model, options);
}

void ShardedDeviceOptimizer::save(const std::string &dir, CheckpointForm form) { engine_->save(dir, form); }
void ShardedDeviceOptimizer::load(const std::string &dir) { engine_->load(dir); }
std::vector<unsigned char> ShardedDeviceOptimizer::serialize() { return engine_->serialize(); }
void ShardedDeviceOptimizer::deserialize(const void *data, std::size_t size) { engine_->deserialize(data, size); }

} // namespace shardopt::cuda

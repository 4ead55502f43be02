#include "strategy_plan.hpp"

#include "../compression/compressed_reducer.hpp"

#include "../hybrid_grid.hpp"
#include "../offload/offload_plan.hpp"
#include "shardopt/error.hpp"

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

const char *memory_space_name(MemorySpace space) noexcept {
    switch (space) {
    case MemorySpace::host: return "host";
    case MemorySpace::cuda: return "cuda";
    }
    return "invalid-memory-space";
}

void validate_sharding_options(const ShardingOptions &o) {
    compression::validate_compression_options(o.compression);
    require(int(o.strategy) >= 0 && int(o.strategy) <= int(Strategy::local_sgd), ErrorCode::invalid_argument,
            "invalid strategy");
    require(o.memory == MemorySpace::host || o.memory == MemorySpace::cuda, ErrorCode::invalid_argument,
            "invalid memory space (host or cuda)");
    require(o.memory == MemorySpace::cuda || o.cuda_stream == nullptr, ErrorCode::invalid_argument,
            "cuda_stream is given but memory is host: set memory to cuda for a device optimizer");
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
    validate_offload_options(o);
}

StrategyPlan plan_of(const ShardingOptions &options) {
    switch (data_strategy_of(options)) {
    case Strategy::ddp: return ddp_plan();
    case Strategy::zero1: return zero1_plan();
    case Strategy::zero2: return zero2_plan();
    case Strategy::fsdp: return fsdp_plan();
    case Strategy::local_sgd: return local_sgd_plan(options.local_sgd_period);
    case Strategy::hybrid: break;
    }
    throw Error(ErrorCode::invalid_argument, "hybrid_data_strategy must be ddp, zero1, zero2 or fsdp");
}

} // namespace shardopt

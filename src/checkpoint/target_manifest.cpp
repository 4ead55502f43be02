#include "target_manifest.hpp"

#include <chrono>
#include <cstring>
#include <random>

#include "container_format.hpp"
#include "resharding.hpp"
#include "shardopt/error.hpp"

namespace shardopt::checkpoint {
namespace {

nlohmann::json optimizer_json(const OptimizerOptions &o) {
    return {{"kind", int(o.kind)},
            {"kind_name", optimizer_kind_name(o.kind)},
            {"lr", o.lr},
            {"weight_decay", o.weight_decay},
            {"maximize", o.maximize},
            {"momentum", o.momentum},
            {"dampening", o.dampening},
            {"nesterov", o.nesterov},
            {"beta1", o.beta1},
            {"beta2", o.beta2},
            {"eps", o.eps},
            {"amsgrad", o.amsgrad},
            {"alpha", o.alpha},
            {"centered", o.centered},
            {"lr_decay", o.lr_decay},
            {"initial_accumulator_value", o.initial_accumulator_value}};
}

nlohmann::json sharding_json(const ShardingOptions &o, std::int64_t step_count) {
    return {{"strategy", strategy_name(o.strategy)},
            {"gradient_accumulation_steps", o.gradient_accumulation_steps},
            {"max_grad_norm", o.max_grad_norm},
            {"skip_nonfinite", o.skip_nonfinite},
            {"staging_buffers", o.staging_buffers},
            {"fsdp_prefetch", o.fsdp_prefetch},
            {"pipeline_parallel_size", o.pipeline_parallel_size},
            {"tensor_parallel_size", o.tensor_parallel_size},
            {"data_parallel_size", o.data_parallel_size},
            {"hybrid_data_strategy", strategy_name(o.hybrid_data_strategy)},
            {"hsdp_replicas", o.hsdp_replicas},
            {"local_sgd_period", o.local_sgd_period},
            {"local_sgd_position", o.local_sgd_period > 0 ? step_count % o.local_sgd_period : 0}};
}

bool host_is_little_endian() {
    const std::uint32_t one = 1;
    unsigned char first;
    std::memcpy(&first, &one, 1);
    return first == 1;
}

} // namespace

LayoutInfo layout_info(const ParameterSet &ps) {
    LayoutInfo info;
    info.dtype = ps.dtype();
    for (const auto &t : ps.tensors()) info.tensors.push_back({t.name, t.count});
    return info;
}

std::string new_generation() {
    std::random_device rd;
    const std::uint64_t t = std::uint64_t(std::chrono::system_clock::now().time_since_epoch().count());
    const std::uint64_t r = (std::uint64_t(rd()) << 32) ^ std::uint64_t(rd());
    return hex64(xxh3(&t, sizeof t) ^ r);
}

std::string part_name(int state_slot) { return state_slot < 0 ? "param" : "state." + std::to_string(state_slot); }

std::string rank_state_part(int rank) { return std::string(SegmentIndex::kRankStatePrefix) + std::to_string(rank); }

void check_checkpointable(const CheckpointTarget &target, const char *what) {
    require(host_is_little_endian(), ErrorCode::unsupported, "checkpoints need a little-endian host");
    require(target.placement().tp_size == 1, ErrorCode::unsupported,
            std::string(what) + ": checkpoints of hybrid grids with tensor parallelism are not supported "
                                "(tensors split across ranks); pipeline stages are");
    require(target.micro_step() == 0, ErrorCode::invalid_state,
            std::string(what) + ": refused in the middle of gradient accumulation (" +
                std::to_string(target.micro_step()) + " of " +
                std::to_string(target.sharding().gradient_accumulation_steps) +
                " micro-steps done); call it after the step() that applies the update");
}

Manifest manifest_of(const CheckpointTarget &target, int world_size) {
    const OptimizerOptions &optimizer = target.optimizer_options();
    Manifest manifest;
    manifest.layout = layout_info(target.layout());
    manifest.world_size = world_size;
    manifest.step_count = target.step_count();
    manifest.state_slots = target.state_slots();
    manifest.optimizer_kind = int(optimizer.kind);
    manifest.lr = optimizer.lr;
    manifest.optimizer = optimizer_json(optimizer);
    manifest.sharding = sharding_json(target.sharding(), target.step_count());
    return manifest;
}

void CheckpointTarget::copy_part(int k, std::size_t first, std::size_t count, void *dst) {
    const std::size_t elem = layout().element_size();
    if (count > 0) std::memcpy(dst, host_part(k) + first * elem, count * elem);
}

std::size_t CheckpointTarget::part_elements(int k) const {
    const bool sharded = k < 0 ? placement().params_sharded : placement().state_sharded;
    return sharded ? layout().shard_count() : layout().padded_count();
}

} // namespace shardopt::checkpoint

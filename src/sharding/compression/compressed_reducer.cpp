#include "compressed_reducer.hpp"

#include <cmath>
#include <cstdlib>
#include <string>

#include "chunked_reducer.hpp"
#include "comm/env_switch.hpp"
#include "hierarchical_chunked_reducer.hpp"
#include "power_sgd_reducer.hpp"
#include "shardopt/error.hpp"

namespace shardopt {

const char *compression_name(GradientCompression method) noexcept {
    switch (method) {
    case GradientCompression::none: return "none";
    case GradientCompression::bf16: return "bf16";
    case GradientCompression::fp16: return "fp16";
    case GradientCompression::int8: return "int8";
    case GradientCompression::int4: return "int4";
    case GradientCompression::top_k: return "top_k";
    case GradientCompression::power_sgd: return "power_sgd";
    }
    return "unknown";
}

namespace compression {

void validate_compression_options(const CompressionOptions &o) {
    const int method = int(o.method);
    require(method >= 0 && method <= int(GradientCompression::power_sgd), ErrorCode::invalid_argument,
            "compression.method " + std::to_string(method) + " is not a compression method");
    require(std::isfinite(o.ratio) && o.ratio > 0.0 && o.ratio <= 1.0, ErrorCode::invalid_argument,
            "compression.ratio must be in (0, 1] (got " + std::to_string(o.ratio) + ")");
    require(o.block_size >= 1 && o.block_size <= (1 << 20), ErrorCode::invalid_argument,
            "compression.block_size must be in [1, 1048576] (got " + std::to_string(o.block_size) + ")");
    require(o.power_sgd_rank >= 1 && o.power_sgd_rank <= 1024, ErrorCode::invalid_argument,
            "compression.power_sgd_rank must be in [1, 1024] (got " + std::to_string(o.power_sgd_rank) + ")");
}

bool hierarchy_allowed_here() {
    const char *env = std::getenv("SHARDOPT_HIERARCHY");
    return !(env && switched_off(env));
}

std::size_t compressed_reducer_bytes(const ParameterSet &layout, const CompressionOptions &options, ReduceMode mode,
                                     const std::vector<int> &host_of_ranks, bool hierarchy_allowed) {
    if (options.method == GradientCompression::power_sgd) return power_sgd_reducer_bytes(layout, options);
    if (auto hosts = hierarchical_hosts(host_of_ranks); !hosts.empty() && hierarchy_allowed)
        return hierarchical_chunked_reducer_bytes(layout, options, mode, hosts);
    return chunked_reducer_bytes(layout, options, mode);
}

std::unique_ptr<CompressedReducer> make_compressed_reducer(Communicator &group, const ParameterSet &layout,
                                                           const CompressionOptions &options, ReduceMode mode) {
    // options: validated with the sharding options (validate_sharding_options).
    require(options.enabled(), ErrorCode::internal, "make_compressed_reducer: compression is off");
    require(layout.dtype() == DType::f32 || layout.dtype() == DType::f64, ErrorCode::unsupported,
            std::string("gradient compression needs f32 or f64 parameters, not ") + dtype_name(layout.dtype()));
    // A communicator of the reducer's own: its point-to-point tags and collectives never meet
    // the caller's traffic on the data group, nor the engine's FSDP gathers.
    CommunicatorPtr own = group.split(0, group.rank());
    if (options.method == GradientCompression::power_sgd) return make_power_sgd_reducer(std::move(own), layout, options, mode);
    // Ranks on several hosts combine a host's gradients first, unless a rank opts out with
    // SHARDOPT_HIERARCHY=0 (as for the collectives; every rank sees the same hosts, so all vote).
    if (auto hosts = hierarchical_hosts(own->host_of_ranks()); !hosts.empty()) {
        std::int32_t allowed = hierarchy_allowed_here() ? 1 : 0;
        own->allreduce(&allowed, 1, ReduceOp::min);
        if (allowed) return make_hierarchical_chunked_reducer(std::move(own), std::move(hosts), layout, options, mode);
    }
    return make_chunked_reducer(std::move(own), layout, options, mode);
}

} // namespace compression
} // namespace shardopt

// The host Space: host memory, the CPU passes (../vector_ops) and the reference update rules,
// each bucket's update spread over threads (ParallelUpdate). Any communicator.
#pragma once

#include <memory>

#include "space.hpp"

namespace shardopt {
class ParallelUpdate;
}

namespace shardopt::engine {

// The reference rules over `params` (spans of host memory, f32 or f64), one state array per
// slot and span; each update spread over `threads`, which must outlive the updater. The host
// space's updater, and ZeRO-Offload's CPU update in a device space.
std::unique_ptr<SpanUpdater> make_host_updater(const std::vector<Span> &params, DType dtype,
                                               const OptimizerOptions &options, ParallelUpdate &threads);

// update_threads as ShardingOptions::update_threads (0 = automatic).
std::unique_ptr<Space> make_host_space(int update_threads);

} // namespace shardopt::engine

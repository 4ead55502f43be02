// The host Space: host memory, the CPU passes (../vector_ops) and the reference update rules,
// each bucket's update spread over threads (ParallelUpdate). Any communicator.
#pragma once

#include <memory>

#include "space.hpp"

namespace shardopt::engine {

// update_threads as ShardingOptions::update_threads (0 = automatic).
std::unique_ptr<Space> make_host_space(int update_threads);

} // namespace shardopt::engine

// The planner's memory figures: rank_memory (shardopt/planner.hpp) over the library's memory plan.
#pragma once

#include <cstdint>

#include "shardopt/planner.hpp"

namespace shardopt::planner {

// What a rank allocates in its memory space (the MemoryStats fields but the host ones).
std::uint64_t space_bytes(const MemoryStats &m);

} // namespace shardopt::planner

// What every checkpoint operation (save.cpp, serialize.cpp, load.cpp) writes or checks of a
// target: its manifest fields, the names of its parts, and whether it can be checkpointed now.
#pragma once

#include <string>

#include "checkpoint_target.hpp"
#include "manifest.hpp"

namespace shardopt::checkpoint {

LayoutInfo layout_info(const ParameterSet &ps);
// A fresh generation name (random, hex) for a checkpoint's files.
std::string new_generation();
// The part name of state slot k ("param" for k < 0, "state.<k>").
std::string part_name(int state_slot);
// The part holding world rank r's rank state.
std::string rank_state_part(int rank);
// Error(unsupported) for a big-endian host or a tensor-parallel grid, Error(invalid_state) in the
// middle of gradient accumulation; `what` names the operation.
void check_checkpointable(const CheckpointTarget &target, const char *what);
// The manifest fields every form shares.
Manifest manifest_of(const CheckpointTarget &target, int world_size);

} // namespace shardopt::checkpoint

// The whole model as the pipeline stages of a hybrid grid hold it: every stage has its own
// ParameterSet (its tensors only); a checkpoint records the model's layout, stage after stage, and
// matches tensors by name, so it loads into any pipeline depth or into one optimizer over the
// whole model.
#pragma once

#include <cstddef>
#include <vector>

#include "checkpoint_target.hpp"
#include "manifest.hpp"

namespace shardopt::checkpoint {

struct ModelLayout {
    LayoutInfo info;                   // every stage's tensors, stage 0 first
    int base = 0;                      // index in info of this rank's first tensor
    std::vector<int> first_tensor;     // per stage: index in info of its first tensor
    std::vector<int> tensor_count;     // per stage
    std::vector<int> root;             // per stage: the world rank that speaks for it (dp = tp = 0)
};

// Collective over `world` (host buffers) when the grid has pipeline stages; otherwise this
// rank's layout. Error(invalid_argument) when two stages hold tensors of the same name.
ModelLayout model_layout(Communicator &world, const Placement &grid, const ParameterSet &layout);

// For each tensor of `mine` (this rank's layout), its index in the checkpoint's layout `saved`,
// matched by name. `model_tensors`: how many tensors the whole model has (all stages). The
// checkpoint must hold exactly the model's tensors, with the same counts and dtype:
// Error(invalid_argument) naming the first difference otherwise.
std::vector<int> match_tensors(const LayoutInfo &saved, const LayoutInfo &mine, std::size_t model_tensors);

} // namespace shardopt::checkpoint

// The model's batches in the optimizer's device memory (TrainingOptions::device_batches): packed
// parameter and gradient buffers of the engine's space, filled and read on its compute stream, so
// a model on the GPU never sees a host copy.
#pragma once

#include <memory>

#include "../../training/batch_memory.hpp"
#include "parameter_store.hpp"
#include "space.hpp"

namespace shardopt::engine {

// `stream` is what the model is told to order its work after (ShardingOptions::cuda_stream).
std::unique_ptr<training::BatchMemory> space_batch_memory(Space &space, ParameterStore &params,
                                                          const ParameterSet &layout, void *stream);

} // namespace shardopt::engine

// The CUDA Space: device memory (cudaMalloc) on the GPU of a GPU communicator, passes
// enqueued on the caller's compute stream, collectives ordered after it by an event the
// communicator's stream waits for.
#pragma once

#include <memory>

#include "space.hpp"
#include "shardopt/device_optimizer.hpp"

namespace shardopt::engine {

// `comm` must be an nccl or staged communicator (or one split from one): the space uses its
// device, and its timeout bounds every host wait. update_threads (ShardingOptions's) runs
// ZeRO-Offload's CPU update. Throws Error(unsupported) when built without CUDA,
// Error(invalid_argument) for any other communicator.
std::unique_ptr<Space> make_cuda_space(const Communicator &comm, cuda::Stream compute_stream, int update_threads);

} // namespace shardopt::engine

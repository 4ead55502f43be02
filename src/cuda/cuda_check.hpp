// CUDA runtime errors as shardopt::Error: the code says what kind of failure it was, the
// message names the call and carries CUDA's own error string.
#pragma once

#include <cuda_runtime_api.h>

#include "shardopt/error.hpp"

namespace shardopt::cuda::detail {

ErrorCode error_code_for(cudaError_t status) noexcept;

// Throws Error when status is not cudaSuccess; `what` names the call ("cudaMalloc 4096 bytes").
void check(cudaError_t status, const char *what);

// After a launch: a bad configuration shows up here, without waiting for the kernel.
void check_launch(const char *kernel);

} // namespace shardopt::cuda::detail

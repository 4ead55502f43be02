// A host vector copied into a new device buffer on a stream (asynchronously: the vector must
// outlive the copy, as the callers' tables do until they synchronize).
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "cuda/cuda_check.hpp"
#include "cuda/device_buffer.hpp"

namespace shardopt::cuda::detail {

template <typename T> DeviceBuffer upload(const std::vector<T> &host, const char *what, cudaStream_t stream) {
    DeviceBuffer buffer(host.size() * sizeof(T), what);
    if (!host.empty())
        check(cudaMemcpyAsync(buffer.get(), host.data(), buffer.bytes(), cudaMemcpyHostToDevice, stream),
              (std::string("copying the ") + what + " to the device").c_str());
    return buffer;
}

} // namespace shardopt::cuda::detail

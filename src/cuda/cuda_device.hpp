// The CUDA device an optimizer runs on, and checks on the pointers callers hand it.
#pragma once

#include <cstddef>
#include <string>

namespace shardopt::cuda {

// CUDA devices this process can use (0 without a driver or GPU): the public
// shardopt::cuda::device_count of shardopt/device_optimizer.hpp, defined here.
int device_count() noexcept;

} // namespace shardopt::cuda

namespace shardopt::cuda::detail {

// The device to use for `requested` (-1: the current one). Throws Error(unsupported) when no
// device can be used, naming why, and Error(invalid_argument) for an ordinal out of range.
int resolve_device(int requested);

// Makes `device` current for its scope and restores the caller's device after (setting the
// current device neither synchronizes nor allocates once the context exists).
class DeviceGuard {
  public:
    explicit DeviceGuard(int device);
    ~DeviceGuard();
    DeviceGuard(const DeviceGuard &) = delete;
    DeviceGuard &operator=(const DeviceGuard &) = delete;

  private:
    int previous_ = -1;
};

// Throws Error(invalid_argument) unless ptr is aligned to elem_size and is memory of `device`
// (or managed memory) that kernels may read: `what` names it in the message ("params[3]").
void require_device_memory(const void *ptr, std::size_t elem_size, int device, const std::string &what);

} // namespace shardopt::cuda::detail

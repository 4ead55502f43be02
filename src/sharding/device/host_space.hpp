// The host DeviceSpace: host memory, the CPU passes of ShardedOptimizer (vector_ops) and its
// reference update rules. With it a ShardedDeviceOptimizer runs the same engine as on a GPU,
// entirely on the CPU, over any communicator: the engine's bookkeeping is tested on machines
// without a GPU, and its results must equal ShardedOptimizer's bit for bit.
#pragma once

#include <memory>

#include "device_space.hpp"

namespace shardopt::device {

std::unique_ptr<DeviceSpace> make_host_space();

} // namespace shardopt::device

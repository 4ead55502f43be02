// The CUDA optimizer in a build without CUDA (SHARDOPT_WITH_CUDA=OFF, or no toolkit found):
// the API exists, so callers compile the same everywhere, and says why it cannot run.
#include "shardopt/device_optimizer.hpp"
#include "shardopt/error.hpp"

namespace shardopt::cuda {

int device_count() noexcept { return 0; }

std::unique_ptr<DeviceOptimizer> DeviceOptimizer::create(const std::vector<DeviceTensor> &, const DeviceOptimizerOptions &,
                                                         Stream) {
    throw Error(ErrorCode::unsupported,
                "shardopt was built without CUDA (SHARDOPT_WITH_CUDA=OFF or no CUDA toolkit was found at configure "
                "time): the CUDA optimizer is not available");
}

} // namespace shardopt::cuda

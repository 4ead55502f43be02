// create_staged_communicator: the device first (a rank without one fails before it makes the
// others wait), then the UCX job, wrapped.
#include "comm/gpu/device_comm.hpp"
#include "shardopt/ucx.hpp"
#include "staged_comm.hpp"

namespace shardopt::gpu {

bool staged_available() noexcept { return true; }

CommunicatorPtr create_staged_communicator(const BootstrapConfig &config, const GpuCommOptions &options) {
    config.validate();
    const int device = detail::pick_device(options.device, config.local_rank, "staged");
    auto host = create_ucx_communicator(config);
    auto comm = std::make_shared<staged::StagedComm>(std::move(host), device);
    comm->set_timeout(config.timeout);
    return comm;
}

} // namespace shardopt::gpu

// create_nccl_communicator: device, NCCL unique id through the bootstrap rendezvous (rank 0's
// blob), non-blocking init polled with the job's timeout and liveness channel.
#include <cstring>

#include "comm/bootstrap/rendezvous.hpp"
#include "comm/gpu/device_comm.hpp"
#include "nccl_check.hpp"
#include "nccl_comm.hpp"
#include "nccl_library.hpp"
#include "nccl_ready.hpp"
#include "cuda/cuda_device.hpp"

namespace shardopt::gpu {

// True when libnccl can be loaded (this loads it): the build has the backend, the host may not.
bool nccl_available() noexcept { return nccl::api_available(); }

CommunicatorPtr create_nccl_communicator(const BootstrapConfig &config, const GpuCommOptions &options) {
    config.validate();
    // NCCL is opened here, on first use (Error(unsupported) when it cannot be).
    const nccl::NcclApi &lib = nccl::api();
    const int device = detail::pick_device(options.device, config.local_rank, "nccl");
    cuda::detail::DeviceGuard guard(device);

    std::vector<std::uint8_t> blob;
    if (config.rank == 0) {
        ncclUniqueId id;
        nccl::check(lib.ncclGetUniqueId(&id), nullptr, "nccl: ncclGetUniqueId");
        blob.assign(reinterpret_cast<const std::uint8_t *>(&id), reinterpret_cast<const std::uint8_t *>(&id) + sizeof id);
    }
    auto rv = bootstrap::rendezvous_allgather(config, blob);
    require(!rv.blobs.empty() && rv.blobs[0].size() == sizeof(ncclUniqueId), ErrorCode::corrupt,
            "nccl: rank 0's rendezvous blob is " + std::to_string(rv.blobs.empty() ? 0 : rv.blobs[0].size()) +
                " bytes, not an NCCL unique id (" + std::to_string(sizeof(ncclUniqueId)) +
                "): does every rank use backend 'nccl'?");
    ncclUniqueId id;
    std::memcpy(&id, rv.blobs[0].data(), sizeof id);
    auto peers = std::make_shared<nccl::PeerWatch>(std::move(rv.liveness));

    const std::string where = "nccl: ncclCommInitRankConfig (rank " + std::to_string(config.rank) + " of " +
                              std::to_string(config.world_size) + ", device " + std::to_string(device) + ")";
    const auto deadline = nccl::Clock::now() + config.timeout;
    ncclConfig_t nccl_config = nccl::nonblocking_config();
    ncclComm_t comm = nullptr;
    ncclResult_t r = lib.ncclCommInitRankConfig(&comm, config.world_size, id, config.rank, &nccl_config);
    try {
        if (comm && (r == ncclSuccess || r == ncclInProgress))
            r = nccl::wait_ready(comm, deadline, [&] { peers->check(where); });
    } catch (...) {
        (void)lib.ncclCommAbort(comm);
        throw;
    }
    if (r != ncclSuccess) {
        const std::string text =
            r == ncclInProgress ? " did not finish within " + std::to_string(config.timeout.count()) +
                                      " ms (a rank did not join, or NCCL is stuck; NCCL_DEBUG=INFO says more)"
                                : ": " + nccl::describe_result(r, comm, "init");
        if (comm) (void)lib.ncclCommAbort(comm);
        throw Error(r == ncclInProgress ? ErrorCode::timeout : nccl::error_code_for(r), where + text);
    }
    auto result = std::make_shared<nccl::NcclComm>(std::move(peers), device, comm, config.timeout);
    result->set_timeout(config.timeout);
    return result;
}

} // namespace shardopt::gpu

// create_ucx_communicator: worker, rendezvous of worker addresses, endpoints, world communicator.
#include <algorithm>
#include <numeric>

#include "../bootstrap/rendezvous.hpp"
#include "shardopt/ucx.hpp"
#include "ucx_comm.hpp"

namespace shardopt {

CommunicatorPtr create_ucx_communicator(const BootstrapConfig &config) {
    config.validate();
    require(config.world_size <= ucx::kMaxRanks, ErrorCode::invalid_argument,
            "ucx: world size above " + std::to_string(ucx::kMaxRanks) + " is not supported");
    auto worker = std::make_shared<ucx::Worker>(config.rank, config.world_size, config.timeout / 4);
    auto rv = bootstrap::rendezvous_allgather(config, worker->address());
    worker->connect(rv.blobs);
    worker->attach_liveness(std::move(rv.liveness));
    std::vector<int> world(std::size_t(config.world_size));
    std::iota(world.begin(), world.end(), 0);
    auto comm = std::make_shared<ucx::UcxComm>(worker, std::move(world), config.rank, 0);
    comm->set_timeout(config.timeout);
    comm->attach_hosts(); // the arena on one host, the hierarchy across hosts
    return comm;
}

} // namespace shardopt

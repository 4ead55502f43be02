#include "host_comms.hpp"

namespace shardopt::engine {

Communicator &HostComms::of(Communicator &comm) {
    for (const auto &[device_comm, host] : made_)
        if (device_comm == &comm) return *host;
    made_.emplace_back(&comm, space_.host_access(comm.shared_from_this()));
    return *made_.back().second;
}

} // namespace shardopt::engine

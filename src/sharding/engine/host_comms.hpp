// HostComms: each communicator of the engine's grid as one whose calls take host buffers, made
// once per communicator by the space (Space::host_access): the engine's collectives on host data
// (option and layout agreement, the initial broadcast, LAMB's statistics, checkpoints, state
// synchronization) go through these.
#pragma once

#include <utility>
#include <vector>

#include "space.hpp"

namespace shardopt::engine {

class HostComms {
  public:
    explicit HostComms(Space &space) : space_(space) {}
    Communicator &of(Communicator &comm);

  private:
    Space &space_;
    std::vector<std::pair<Communicator *, CommunicatorPtr>> made_; // by communicator
};

} // namespace shardopt::engine

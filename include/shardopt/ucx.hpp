// The UCX backend: ranks are separate processes on one or many hosts, talking through UCP's tag
// API over whatever transports UCX picks (shm, cma, tcp, ib). Rank 0 hosts a TCP rendezvous
// where every rank posts its UCX worker address (see bootstrap.hpp); after that all traffic,
// including split(), goes over UCX. The rendezvous connections stay open for the job's life as
// its liveness channel: when a process dies, rank 0 sees its connection close and tells the
// others, so every wait on it fails with ErrorCode::peer_lost naming it (UCX's own peer error
// handling would cost local ranks the shared-memory transports; SHARDOPT_UCX_PEER_ERRORS=1
// turns it back on).
#pragma once

#include <string>

#include "shardopt/bootstrap.hpp"
#include "shardopt/comm.hpp"

namespace shardopt {

// True when this build has the UCX backend.
bool ucx_available() noexcept;

// Joins the job described by `config` (blocking until every rank joined, or config.timeout).
// The communicator's timeout() starts as config.timeout. Throws Error(unsupported) when built
// without UCX; timeout when the master is unreachable or ranks are missing; invalid_argument
// when the master refuses the join (wrong token, world size disagreement, duplicate rank).
CommunicatorPtr create_ucx_communicator(const BootstrapConfig &config);

// Backend by name: "ucx", "inprocess" (a group of one: rank 0 of size 1), or "" meaning
// SHARDOPT_BACKEND when set, else "ucx" when a launcher's rank variables are present, else
// "inprocess". Rank/size/master come from BootstrapConfig::from_env(). "ucx" without a world
// size in the environment is Error(invalid_argument) (set SHARDOPT_WORLD_SIZE=1 for a world of
// one), so processes started without a launcher cannot each train alone unnoticed.
CommunicatorPtr create_communicator_from_env(const std::string &backend = "");

} // namespace shardopt

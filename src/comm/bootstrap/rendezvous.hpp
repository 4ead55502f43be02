// Rendezvous: a one-shot allgather of small blobs (UCX worker addresses) through rank 0.
//
// Rank 0 listens on bind_addr (or master_addr):master_port; every other rank connects
// (retrying until the timeout) and sends JOIN {world_size, rank, job token, blob}. Rank 0
// checks the token in constant time and refuses a wrong one (that connection only: a stray
// client cannot break the job). A world size that disagrees, a rank out of range or a rank
// joining twice fails the whole rendezvous at once, on rank 0 and on every rank connected so
// far, with a message naming what disagreed. When every rank joined, rank 0 sends WELCOME
// {all blobs in rank order} to each. The connections then stay open as the job's liveness
// channel (liveness.hpp).
#pragma once

#include <cstdint>
#include <vector>

#include "liveness.hpp"
#include "shardopt/bootstrap.hpp"

namespace shardopt::bootstrap {

struct RendezvousResult {
    std::vector<std::vector<std::uint8_t>> blobs;  // every rank's blob, in rank order
    std::unique_ptr<Liveness> liveness;            // null for a world of one
};

RendezvousResult rendezvous_allgather(const BootstrapConfig &config, const std::vector<std::uint8_t> &mine);

} // namespace shardopt::bootstrap

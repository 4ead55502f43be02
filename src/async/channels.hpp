// Channels: the communicators asynchronous SGD's messages travel on, split from the optimizer's
// communicator once, at creation (collective), and used point to point only.
//
// A communicator receives in issue order, whatever the sender, and takes its sends from one thread
// and its receives from one other thread at a time. So: `grads` carries gradients to the owners
// and rank 0's commands, received by each rank's server thread; `params` the owners' versions to
// the workers, received by each rank's worker thread. Rank 0's worker and server threads both send
// on `grads` (gradients, commands): a Channel lets them take turns. Rank 0 must take the
// workers' notices in arrival order, whoever sends first: each worker w >= 1 has a notice channel
// of its own, a two-rank communicator {rank 0, rank w}, read by a receiver thread of rank 0 for w.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "shardopt/comm.hpp"

namespace shardopt::async {

// A communicator whose sends may come from several threads of this rank (one at a time) and whose
// receives come from one thread only.
class Channel {
  public:
    explicit Channel(CommunicatorPtr comm) : comm_(std::move(comm)) {}
    Communicator &comm() const noexcept { return *comm_; }
    // Buffered: returns once the bytes are handed to the transport.
    void send(const void *data, std::size_t bytes, int peer, int tag);
    // Returns once `bytes` from `peer` with `tag` are in `data`; throws the communicator's error
    // (a timeout, a lost peer, an abort). From the channel's receiving thread only.
    void recv(void *data, std::size_t bytes, int peer, int tag) { comm_->recv(data, bytes, DType::u8, peer, tag); }

  private:
    CommunicatorPtr comm_;
    std::mutex send_;
};

class Channels {
  public:
    // Collective over world: 2 + (size - 1) splits.
    explicit Channels(Communicator &world);

    Channel grads, params;
    // Worker w's notices to rank 0 (w >= 1; in it rank 0 is 0 and w is 1): on rank 0 every
    // w's, on rank w its own, null elsewhere (and at 0).
    std::vector<CommunicatorPtr> notices;

    // The notice channels wait `timeout` (the world's, set at the start of each session), the
    // others twice that: whatever a worker or owner waits for comes after rank 0 heard from the
    // workers, so a silent worker is reported by rank 0, which knows it is waiting for it, rather
    // than by the ranks whose messages rank 0 holds back meanwhile.
    void set_timeout(Communicator::Duration timeout);
    // Aborts every channel: this rank's blocked calls fail with `reason`, and the peers learn it.
    void abort(const std::string &reason, ErrorCode code);
    std::uint64_t bytes_sent() const;
};

} // namespace shardopt::async

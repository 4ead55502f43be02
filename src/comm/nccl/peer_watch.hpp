// PeerWatch: the job's liveness channel (bootstrap/liveness.hpp) shared by a world NCCL
// communicator and every communicator split from it. Liveness::poll() hands each death out once;
// this keeps them, so every communicator of the job and every waiting thread learns of it.
//
// NCCL communicators do not know their members' world ranks, so a rank that died fails every
// communicator of the job (an NCCL job cannot go on without a member anyway); a rank that left
// cleanly (BYE) fails nothing: a wait on it ends at the timeout.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "comm/bootstrap/liveness.hpp"

namespace shardopt::nccl {

class PeerWatch {
  public:
    // liveness may be null (a world of one): then nothing is ever lost.
    explicit PeerWatch(std::unique_ptr<bootstrap::Liveness> liveness);
    // The first death seen, in words ("rank 2 of the job is lost: ..."), or empty. Cheap when
    // there is no news.
    std::string lost();
    // Throws Error(peer_lost, context + ": " + lost()) when a rank died.
    void check(const std::string &context);

  private:
    std::unique_ptr<bootstrap::Liveness> liveness_;
    std::mutex mutex_;
    std::string lost_; // the first death, in words (under mutex_)
};

} // namespace shardopt::nccl

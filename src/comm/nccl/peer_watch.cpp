#include "peer_watch.hpp"

#include "shardopt/error.hpp"

namespace shardopt::nccl {

PeerWatch::PeerWatch(std::unique_ptr<bootstrap::Liveness> liveness) : liveness_(std::move(liveness)) {}

std::string PeerWatch::lost() {
    if (!liveness_) return {};
    std::lock_guard<std::mutex> lock(mutex_);
    if (lost_.empty())
        for (const auto &event : liveness_->poll())
            if (!event.left && lost_.empty())
                lost_ = "rank " + std::to_string(event.rank) + " of the job is lost: " + event.reason;
    return lost_;
}

void PeerWatch::check(const std::string &context) {
    const std::string text = lost();
    if (!text.empty()) throw Error(ErrorCode::peer_lost, context + ": " + text);
}

} // namespace shardopt::nccl

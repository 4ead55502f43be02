#include "gather_order.hpp"

namespace shardopt::engine {

int GatherOrder::next_after(int b, int units) {
    if (b == last_) return predicted_;
    const int previous = last_;
    last_ = b;
    recording_.push_back(b);
    if (following_ && replay_at_ < replay_.size() && replay_[replay_at_] == b) {
        ++replay_at_;
        predicted_ = replay_at_ < replay_.size() ? replay_[replay_at_] : -1; // the step's last unit: nothing after
        return predicted_;
    }
    following_ = false;
    const int next = previous > b ? b - 1 : b + 1;
    predicted_ = next >= 0 && next < units ? next : -1;
    return predicted_;
}

void GatherOrder::end_step() {
    if (!recording_.empty()) replay_.swap(recording_); // each keeps its capacity: no allocation per step
    recording_.clear();
    replay_at_ = 0;
    following_ = true;
    last_ = predicted_ = -1;
}

} // namespace shardopt::engine

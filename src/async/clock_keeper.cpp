#include "clock_keeper.hpp"

#include <algorithm>

#include "shardopt/error.hpp"

namespace shardopt::async {

ClockKeeper::ClockKeeper(int workers, int staleness, std::vector<std::int64_t> clock_samples)
    : workers_(std::size_t(workers)), staleness_(staleness), clock_samples_(std::move(clock_samples)) {
    require(workers >= 1, ErrorCode::invalid_argument, "clock keeper: no workers");
    require(staleness >= 0, ErrorCode::invalid_argument, "clock keeper: negative staleness");
    require(!clock_samples_.empty(), ErrorCode::invalid_argument, "clock keeper: a session needs at least one clock");
}

bool ClockKeeper::computing(int w) const { return workers_.at(std::size_t(w)).phase == Phase::computing; }

void ClockKeeper::pushed(const Push &p) {
    require(p.worker >= 0 && p.worker < int(workers_.size()), ErrorCode::internal,
            "async SGD protocol: a push from unknown worker " + std::to_string(p.worker));
    Worker &w = workers_[std::size_t(p.worker)];
    if (w.phase != Phase::computing || p.label != w.label || p.version != w.version || p.seq != w.seq)
        throw Error(ErrorCode::internal,
                    "async SGD protocol: rank " + std::to_string(p.worker) + " pushed step " + std::to_string(p.seq) +
                        " (label " + std::to_string(p.label) + ", version " + std::to_string(p.version) +
                        ") but was handed step " + std::to_string(w.seq) + " (label " + std::to_string(w.label) +
                        ", version " + std::to_string(w.version) + ")" +
                        (w.phase == Phase::computing ? "" : " and was not computing"));
    pending_.push_back(p);
    ++w.seq;
    w.phase = Phase::waiting;
    // Read bound: its next step, labelled at least label + 1, needs version >= label + 1 - s;
    // after the session's last label it needs the last version.
    w.want = p.label + 1 >= clocks() ? clocks() : std::max<std::int64_t>(0, p.label + 1 - staleness_);
}

bool ClockKeeper::may_apply() const {
    const std::int64_t c = version_;
    if (c >= clocks()) return false;
    if (std::none_of(pending_.begin(), pending_.end(), [&](const Push &p) { return p.label <= c; })) return false;
    bool all_in = true, anyone_computing = false;
    for (const Worker &w : workers_) {
        if (w.phase != Phase::computing) continue;
        anyone_computing = true;
        // Apply bound: a gradient being computed on version <= c - s must be in update c at the latest.
        if (w.version + staleness_ <= c) return false;
        if (w.label <= c) all_in = false;
    }
    // The session's last update waits for every gradient in flight.
    if (c + 1 == clocks() && anyone_computing) return false;
    if (all_in) return true;
    // A worker that ran s clocks ahead of c waits for update c: the ones still owing clock c are
    // beyond the bound, and update c goes without them.
    return std::any_of(workers_.begin(), workers_.end(),
                       [&](const Worker &w) { return w.phase == Phase::waiting && w.want > c; });
}

Decision ClockKeeper::apply() {
    Decision d;
    d.kind = Decision::Kind::apply;
    d.clock = version_;
    auto eligible = std::stable_partition(pending_.begin(), pending_.end(),
                                          [&](const Push &p) { return p.label <= d.clock; });
    d.members.assign(pending_.begin(), eligible);
    pending_.erase(pending_.begin(), eligible);
    std::sort(d.members.begin(), d.members.end(), [](const Push &a, const Push &b) {
        return a.worker != b.worker ? a.worker < b.worker : a.label < b.label;
    });
    double sum = 0.0;
    for (std::size_t i = 0; i < d.members.size(); ++i) {
        const Push &m = d.members[i];
        sum = i == 0 ? m.loss : sum + m.loss; // the order and arithmetic of an allreduce(avg)
        max_staleness_ = std::max(max_staleness_, int(d.clock - m.version));
        if (m.label < d.clock) ++late_;
    }
    d.loss = sum / double(d.members.size());
    const std::int64_t samples = clock_samples_[std::size_t(d.clock)];
    loss_sum_ += d.loss * double(samples);
    loss_samples_ += samples;
    ++version_;
    return d;
}

Decision ClockKeeper::serve(int index) {
    Worker &w = workers_[std::size_t(index)];
    Decision d;
    d.kind = Decision::Kind::serve;
    d.worker = index;
    d.clock = version_;
    if (version_ == clocks()) {
        w.phase = Phase::done;
        ++done_;
        d.label = clocks();
        return d;
    }
    // A worker that fell behind skips to the version it is handed.
    const std::int64_t label = std::max(w.label + 1, version_);
    skipped_ += label - (w.label + 1);
    max_lead_ = std::max(max_lead_, int(label - version_));
    w.phase = Phase::computing;
    w.label = label;
    w.version = version_;
    d.label = label;
    return d;
}

Decision ClockKeeper::next() {
    // Applying first hands the waiting workers the newer version.
    if (may_apply()) return apply();
    for (int i = 0; i < int(workers_.size()); ++i)
        if (workers_[std::size_t(i)].phase == Phase::waiting && workers_[std::size_t(i)].want <= version_)
            return serve(i);
    return Decision{};
}

std::string ClockKeeper::awaiting() const {
    std::string out;
    for (int i = 0; i < int(workers_.size()); ++i) {
        const Worker &w = workers_[std::size_t(i)];
        if (w.phase != Phase::computing) continue;
        out += (out.empty() ? "" : "; ") + std::string("rank ") + std::to_string(i) + " computes the step labelled " +
               std::to_string(w.label) + " on version " + std::to_string(w.version);
    }
    return out.empty() ? "no worker computes" : out;
}

} // namespace shardopt::async

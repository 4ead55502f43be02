// ClockKeeper: rank 0's account of one session's clocks, and its decisions: which gradients each
// update holds, and when a worker is handed which version. A plain state machine (no messages,
// no threads), so its rules can be checked on any schedule of arrivals; shardopt/async_sgd.hpp
// states them, this is where they are enforced.
//
// Each worker is computing a step (labelled, on a version it was handed), or waiting (it pushed
// the step's gradient and asked for a version), or done (it holds the session's last version).
// Every worker starts computing the step labelled 0 on version 0. next() returns one decision at
// a time: apply the update of the current clock when it may go, else hand the current version
// to a waiting worker whose read bound it meets, else wait for the next push.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace shardopt::async {

// A gradient pushed by a worker, as the keeper knows it (from the worker's notice).
struct Push {
    int worker = 0;
    std::int64_t seq = 0;     // the worker's pushes this session, from 0
    std::int64_t label = 0;   // the clock it is meant for
    std::int64_t version = 0; // the version it was computed on
    double loss = 0.0;
};

struct Decision {
    enum class Kind { wait, apply, serve };
    Kind kind = Kind::wait;
    std::int64_t clock = 0;   // apply: the clock applied; serve: the version handed out
    std::vector<Push> members; // apply: its gradients, in (worker, label) order
    double loss = 0.0;        // apply: the mean of their losses, summed in that order
    int worker = -1;          // serve
    std::int64_t label = 0;   // serve: the worker's next step, or clocks() when it is done
};

class ClockKeeper {
  public:
    // clock_samples[c]: the size of batch c, the weight of clock c's loss in the epoch loss; there
    // are clock_samples.size() clocks (>= 1) in the session.
    ClockKeeper(int workers, int staleness, std::vector<std::int64_t> clock_samples);

    std::int64_t clocks() const noexcept { return std::int64_t(clock_samples_.size()); }
    std::int64_t version() const noexcept { return version_; }
    // Records the push of a computing worker's step. Error(internal) when it is not the step
    // the worker was handed (a protocol error).
    void pushed(const Push &push);
    Decision next();
    // Every clock applied and every worker handed the last version.
    bool finished() const noexcept { return done_ == int(workers_.size()); }
    // Worker w computes a step: a push from it is due.
    bool computing(int w) const;
    // "rank 2 computes the step labelled 7 on version 4; ..." (what an idle keeper waits for).
    std::string awaiting() const;

    double epoch_loss() const noexcept { return loss_samples_ > 0 ? loss_sum_ / double(loss_samples_) : 0.0; }
    std::int64_t late_gradients() const noexcept { return late_; }
    std::int64_t skipped_clocks() const noexcept { return skipped_; }
    int max_staleness() const noexcept { return max_staleness_; }
    int max_lead() const noexcept { return max_lead_; }

  private:
    enum class Phase { computing, waiting, done };
    struct Worker {
        Phase phase = Phase::computing;
        std::int64_t label = 0;   // computing: the step's label; waiting: the last step's
        std::int64_t version = 0; // computing: the version it computes on
        std::int64_t want = 0;    // waiting: the oldest version its next step may use
        std::int64_t seq = 0;     // the next push expected
    };
    bool may_apply() const;
    Decision apply();
    Decision serve(int w);

    std::vector<Worker> workers_;
    std::int64_t staleness_;
    std::vector<std::int64_t> clock_samples_;
    std::int64_t version_ = 0;
    std::vector<Push> pending_; // pushed, not yet applied
    int done_ = 0;
    double loss_sum_ = 0.0;
    std::int64_t loss_samples_ = 0;
    std::int64_t late_ = 0, skipped_ = 0;
    int max_staleness_ = 0, max_lead_ = 0;
};

} // namespace shardopt::async

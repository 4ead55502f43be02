// What optimize() keeps from epoch to epoch, shared by every training loop (the step engine's,
// asynchronous SGD's): the loss history, the best loss and the parameters that reached it, and
// the patience count behind early stopping.
#pragma once

#include <cstddef>
#include <functional>

#include "shardopt/sharded_optimizer.hpp"

namespace shardopt::training {

class EpochProgress {
  public:
    // read_packed(dst): the current parameters, packed_bytes of them (collective where the
    // optimizer's get_parameters is). agree_stop(vote): the ranks' early-stop vote (collective).
    EpochProgress(const OptimizeOptions &options, std::size_t packed_bytes, std::function<void(void *)> read_packed,
                  std::function<bool(bool)> agree_stop);

    // Records an epoch's mean loss (the same on every rank) and says whether training stops after
    // it: max_iterations was hit, or the ranks agree patience has run out (then stopped_early).
    bool end_epoch(double epoch_loss, bool hit_limit);
    OptimizeResult &result() { return result_; }
    // The result; its best parameters are the current ones when no epoch ever improved.
    OptimizeResult finish();

  private:
    void keep_best();

    const OptimizeOptions &options_;
    std::size_t packed_bytes_;
    std::function<void(void *)> read_packed_;
    std::function<bool(bool)> agree_stop_;
    OptimizeResult result_;
    int epochs_without_improvement_ = 0;
    bool kept_ = false; // best_parameters holds a snapshot
};

} // namespace shardopt::training

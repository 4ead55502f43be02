#include "epoch_progress.hpp"

#include <limits>
#include <utility>

namespace shardopt::training {

EpochProgress::EpochProgress(const OptimizeOptions &options, std::size_t packed_bytes,
                             std::function<void(void *)> read_packed, std::function<bool(bool)> agree_stop)
    : options_(options), packed_bytes_(packed_bytes), read_packed_(std::move(read_packed)),
      agree_stop_(std::move(agree_stop)) {
    result_.best_loss = std::numeric_limits<double>::infinity();
}

void EpochProgress::keep_best() {
    result_.best_parameters.resize(packed_bytes_);
    read_packed_(result_.best_parameters.data());
    kept_ = true;
}

bool EpochProgress::end_epoch(double epoch_loss, bool hit_limit) {
    result_.loss_history.push_back(epoch_loss);
    if (epoch_loss < result_.best_loss - options_.min_delta) {
        result_.best_loss = epoch_loss;
        epochs_without_improvement_ = 0;
        keep_best();
    } else {
        ++epochs_without_improvement_;
    }
    if (hit_limit) return true;
    const bool want_stop = options_.patience > 0 && epochs_without_improvement_ >= options_.patience;
    if (agree_stop_(want_stop)) {
        result_.stopped_early = true;
        return true;
    }
    return false;
}

OptimizeResult EpochProgress::finish() {
    if (!kept_) keep_best();
    return std::move(result_);
}

} // namespace shardopt::training

// TrainingOptions: their checks, one place for every language.
#include <cmath>
#include <string>

#include "shardopt/error.hpp"
#include "shardopt/training.hpp"

namespace shardopt {

const char *dataset_name(Dataset d) noexcept {
    switch (d) {
    case Dataset::training: return "training";
    case Dataset::validation: return "validation";
    case Dataset::test: return "test";
    }
    return "unknown";
}

void TrainingOptions::validate(bool require_samples) const {
    auto field = [](bool ok, const std::string &what) {
        require(ok, ErrorCode::invalid_argument, "training options: " + what);
    };
    field(num_samples >= 1 || (!require_samples && num_samples == 0), "num_samples must be >= 1 (got " + std::to_string(num_samples) + ")");
    field(num_validation_samples >= 0, "num_validation_samples must be >= 0");
    field(num_test_samples >= 0, "num_test_samples must be >= 0");
    field(batch_size >= 0, "batch_size must be >= 0 (0 = the whole set; got " + std::to_string(batch_size) + ")");
    field(max_epochs >= 1, "max_epochs must be >= 1 (got " + std::to_string(max_epochs) +
                               "; start from shardopt_training_options_init)");
    field(max_steps >= 0, "max_steps must be >= 0 (0 = no limit)");
    field(patience >= 1, "patience must be >= 1 (got " + std::to_string(patience) + ")");
    field(std::isfinite(tolerance) && tolerance >= 0, "tolerance must be finite and >= 0");
    field(first_epoch >= 0, "first_epoch must be >= 0");
    field(start_step >= 0, "start_step must be >= 0");
    schedule.validate();
}

std::int64_t TrainingOptions::effective_batch() const noexcept {
    return batch_size == 0 || batch_size > num_samples ? num_samples : batch_size;
}

} // namespace shardopt

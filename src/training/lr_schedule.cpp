// LearningRateSchedule: the rate of an epoch or step, as every language's schedules give it.
#include <cmath>
#include <string>

#include "shardopt/error.hpp"
#include "shardopt/training.hpp"

namespace shardopt {
namespace {

void require_field(bool ok, const std::string &what) {
    require(ok, ErrorCode::invalid_argument, "training options: " + what);
}

bool has_warmup(LrScheduleKind k) {
    return k == LrScheduleKind::warmup || k == LrScheduleKind::warmup_cosine || k == LrScheduleKind::warmup_step_decay;
}

// torch's CosineAnnealingLR in closed form; u is clamped to the period.
double cosine(std::int64_t u, std::int64_t period, double base, double min_lr) {
    const double frac = double(u < period ? u : period) / double(period);
    return min_lr + (base - min_lr) * (1.0 + std::cos(M_PI * frac)) / 2.0;
}

} // namespace

void LearningRateSchedule::validate() const {
    require_field(int(kind) >= 0 && int(kind) <= int(LrScheduleKind::custom),
                  "lr_schedule is " + std::to_string(int(kind)) + ", not a shardopt_lr_schedule");
    require_field(warmup >= 0, "warmup must be >= 0 (got " + std::to_string(warmup) + ")");
    require_field(!has_warmup(kind) || warmup >= 1, "warmup must be >= 1 for a warm-up schedule");
    require_field(decay_period >= 0, "decay_period must be >= 0 (got " + std::to_string(decay_period) + ")");
    require_field(std::isfinite(min_lr) && min_lr >= 0, "min_lr must be finite and >= 0");
    require_field(std::isfinite(gamma) && gamma > 0, "gamma must be finite and > 0");
    require_field(kind != LrScheduleKind::custom || bool(custom), "lr_schedule CUSTOM needs lr_fn");
}

double LearningRateSchedule::rate(std::int64_t t, double base, std::int64_t span) const {
    require(t >= 0, ErrorCode::invalid_argument, "learning-rate schedule: t must be >= 0 (got " + std::to_string(t) + ")");
    if (kind == LrScheduleKind::custom) {
        const double lr = custom(t, base);
        require(std::isfinite(lr) && lr >= 0, ErrorCode::invalid_argument,
                "learning-rate schedule: the custom rate at t = " + std::to_string(t) + " is " + std::to_string(lr) +
                    " (must be finite and >= 0)");
        return lr;
    }
    if (kind == LrScheduleKind::constant) return base;
    std::int64_t u = t; // t after the warm-up
    if (has_warmup(kind)) {
        if (t < warmup) return base * double(t + 1) / double(warmup);
        u = t - warmup;
    }
    switch (kind) {
    case LrScheduleKind::cosine:
    case LrScheduleKind::warmup_cosine: {
        std::int64_t period = decay_period;
        if (period == 0) period = span - (kind == LrScheduleKind::warmup_cosine ? warmup : 0);
        if (period < 1) period = 1;
        return cosine(u, period, base, min_lr);
    }
    case LrScheduleKind::step_decay:
    case LrScheduleKind::warmup_step_decay:
        return base * std::pow(gamma, double(u / (decay_period == 0 ? 1 : decay_period)));
    default:
        return base; // warmup: constant after it
    }
}

} // namespace shardopt

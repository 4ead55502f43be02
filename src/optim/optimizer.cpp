// Optimizer options (torch.optim defaults, validation), the factory and what all rules share.
#include <cmath>
#include <sstream>

#include "rules.hpp"
#include "shardopt/error.hpp"
#include "shardopt/optim.hpp"

namespace shardopt {

namespace {

bool is_valid(OptimizerKind kind) {
    return int(kind) >= int(OptimizerKind::sgd) && int(kind) <= int(OptimizerKind::lamb);
}

std::string kind_text(OptimizerKind kind) { return std::to_string(int(kind)); }

// Throws invalid_argument naming the field unless lo <= value (and value < hi when given).
void require_range(const char *field, double value, double lo, bool below_one = false) {
    bool ok = std::isfinite(value) && value >= lo && (!below_one || value < 1.0);
    if (ok) return;
    std::ostringstream msg;
    msg << field << " must be " << (below_one ? "in [" : ">= ") << lo << (below_one ? ", 1)" : "")
        << ", got " << value;
    throw Error(ErrorCode::invalid_argument, msg.str());
}

// A feature flag set for a rule that lacks it would otherwise be silently ignored.
void require_flag_unset(const char *field, bool value, OptimizerKind kind, const char *owners) {
    if (!value) return;
    throw Error(ErrorCode::invalid_argument, std::string(field) + " is only available for " + owners +
                                                 ", not " + optimizer_kind_name(kind));
}

} // namespace

const char *optimizer_kind_name(OptimizerKind kind) noexcept {
    switch (kind) {
    case OptimizerKind::sgd: return "sgd";
    case OptimizerKind::adam: return "adam";
    case OptimizerKind::adamw: return "adamw";
    case OptimizerKind::rmsprop: return "rmsprop";
    case OptimizerKind::adagrad: return "adagrad";
    case OptimizerKind::lamb: return "lamb";
    }
    return "invalid-optimizer";
}

OptimizerOptions OptimizerOptions::defaults(OptimizerKind kind) {
    require(is_valid(kind), ErrorCode::invalid_argument, "kind " + kind_text(kind) + " is not an optimizer");
    OptimizerOptions o;
    o.kind = kind;
    switch (kind) {
    case OptimizerKind::sgd: o.lr = 1e-3; break;
    case OptimizerKind::adam: o.lr = 1e-3; o.eps = 1e-8; break;
    case OptimizerKind::adamw: o.lr = 1e-3; o.eps = 1e-8; o.weight_decay = 1e-2; break;
    case OptimizerKind::rmsprop: o.lr = 1e-2; o.alpha = 0.99; o.eps = 1e-8; break;
    case OptimizerKind::adagrad: o.lr = 1e-2; o.eps = 1e-10; break;
    case OptimizerKind::lamb: o.lr = 1e-3; o.eps = 1e-6; break;
    }
    return o;
}

void OptimizerOptions::validate() const {
    require(is_valid(kind), ErrorCode::invalid_argument, "kind " + kind_text(kind) + " is not an optimizer");
    require_range("lr", lr, 0.0);
    require_range("weight_decay", weight_decay, 0.0);
    switch (kind) {
    case OptimizerKind::sgd:
        require_range("momentum", momentum, 0.0);
        require(std::isfinite(dampening), ErrorCode::invalid_argument, "dampening must be finite");
        require(!nesterov || (momentum > 0.0 && dampening == 0.0), ErrorCode::invalid_argument,
                "nesterov requires momentum > 0 and dampening == 0");
        break;
    case OptimizerKind::adam:
    case OptimizerKind::adamw:
    case OptimizerKind::lamb:
        require_range("beta1", beta1, 0.0, true);
        require_range("beta2", beta2, 0.0, true);
        require_range("eps", eps, 0.0);
        break;
    case OptimizerKind::rmsprop:
        require_range("alpha", alpha, 0.0);
        require(alpha <= 1.0, ErrorCode::invalid_argument, "alpha must be <= 1 (it is a decay rate)");
        require_range("eps", eps, 0.0);
        require_range("momentum", momentum, 0.0);
        break;
    case OptimizerKind::adagrad:
        require_range("lr_decay", lr_decay, 0.0);
        require_range("initial_accumulator_value", initial_accumulator_value, 0.0);
        require_range("eps", eps, 0.0);
        break;
    }
    if (kind != OptimizerKind::sgd) require_flag_unset("nesterov", nesterov, kind, "sgd");
    if (kind != OptimizerKind::adam && kind != OptimizerKind::adamw)
        require_flag_unset("amsgrad", amsgrad, kind, "adam and adamw");
    if (kind != OptimizerKind::rmsprop) require_flag_unset("centered", centered, kind, "rmsprop");
}

Optimizer::Optimizer(const OptimizerOptions &options) : options_(options) {}

std::unique_ptr<Optimizer> Optimizer::create(const OptimizerOptions &options) {
    options.validate();
    switch (options.kind) {
    case OptimizerKind::sgd: return make_sgd(options);
    case OptimizerKind::adam:
    case OptimizerKind::adamw: return make_adam(options);
    case OptimizerKind::rmsprop: return make_rmsprop(options);
    case OptimizerKind::adagrad: return make_adagrad(options);
    case OptimizerKind::lamb: return make_lamb(options);
    }
    throw Error(ErrorCode::internal, "validated options with an unknown optimizer kind");
}

void Optimizer::set_lr(double lr) {
    require_range("lr", lr, 0.0);
    options_.lr = lr;
}

// Only rules with per-tensor statistics have a first phase; calling it on others is a caller bug.
[[noreturn]] static void no_first_phase(OptimizerKind kind) {
    throw Error(ErrorCode::internal, std::string("begin_step called on ") + optimizer_kind_name(kind) +
                                         ", which has no per-tensor statistics");
}

void Optimizer::begin_step(const Segment<float> &, int64_t, double *) const { no_first_phase(kind()); }
void Optimizer::begin_step(const Segment<double> &, int64_t, double *) const { no_first_phase(kind()); }

} // namespace shardopt

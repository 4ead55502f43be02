// Optimizer options (torch.optim defaults, validation), the factory and what all rules share.
#include <cmath>
#include <sstream>

#include "lowbit.hpp"
#include "rules.hpp"
#include "shardopt/error.hpp"
#include "shardopt/optim.hpp"

namespace shardopt {

namespace {

bool is_valid(OptimizerKind kind) {
    return int(kind) >= int(OptimizerKind::sgd) && int(kind) <= int(OptimizerKind::muon);
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
    case OptimizerKind::lion: return "lion";
    case OptimizerKind::adafactor: return "adafactor";
    case OptimizerKind::nadam: return "nadam";
    case OptimizerKind::adamax: return "adamax";
    case OptimizerKind::adadelta: return "adadelta";
    case OptimizerKind::muon: return "muon";
    }
    return "invalid-optimizer";
}

const char *state_precision_name(StatePrecision precision) noexcept {
    switch (precision) {
    case StatePrecision::full: return "full";
    case StatePrecision::bits8: return "8bit";
    case StatePrecision::bits4: return "4bit";
    }
    return "invalid-state-precision";
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
    case OptimizerKind::lion: o.lr = 1e-4; o.beta1 = 0.9; o.beta2 = 0.99; break;
    case OptimizerKind::adafactor: o.lr = 1e-2; o.eps = 0.0; break; // eps1 None: the dtype's epsilon
    case OptimizerKind::nadam: o.lr = 2e-3; o.eps = 1e-8; break;
    case OptimizerKind::adamax: o.lr = 2e-3; o.eps = 1e-8; break;
    case OptimizerKind::adadelta: o.lr = 1.0; o.eps = 1e-6; break;
    case OptimizerKind::muon:
        o.lr = 1e-3;
        o.weight_decay = 0.1;
        o.momentum = 0.95;
        o.nesterov = true;
        o.eps = 1e-7;
        break;
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
    case OptimizerKind::lion:
        require_range("beta1", beta1, 0.0);
        require(beta1 <= 1.0, ErrorCode::invalid_argument, "beta1 must be in [0, 1], got " + std::to_string(beta1));
        require_range("beta2", beta2, 0.0);
        require(beta2 <= 1.0, ErrorCode::invalid_argument, "beta2 must be in [0, 1], got " + std::to_string(beta2));
        break;
    case OptimizerKind::adafactor:
        require(std::isfinite(beta2_decay) && beta2_decay <= 0.0, ErrorCode::invalid_argument,
                "beta2_decay must be <= 0, got " + std::to_string(beta2_decay));
        require_range("eps", eps, 0.0);
        require_range("eps2", eps2, 0.0);
        require(std::isfinite(clip_threshold) && clip_threshold >= 1.0, ErrorCode::invalid_argument,
                "clip_threshold (torch's d) must be >= 1, got " + std::to_string(clip_threshold));
        break;
    case OptimizerKind::nadam:
        require_range("beta1", beta1, 0.0, true);
        require_range("beta2", beta2, 0.0, true);
        require_range("eps", eps, 0.0);
        require_range("momentum_decay", momentum_decay, 0.0);
        break;
    case OptimizerKind::adamax:
        require_range("beta1", beta1, 0.0, true);
        require_range("beta2", beta2, 0.0, true);
        require_range("eps", eps, 0.0);
        break;
    case OptimizerKind::adadelta:
        require_range("rho", rho, 0.0);
        require(rho <= 1.0, ErrorCode::invalid_argument, "rho must be in [0, 1], got " + std::to_string(rho));
        require_range("eps", eps, 0.0);
        break;
    case OptimizerKind::muon:
        require_range("momentum", momentum, 0.0);
        require_range("eps", eps, 0.0);
        require(ns_steps >= 0 && ns_steps < 100, ErrorCode::invalid_argument,
                "ns_steps must be in [0, 100), got " + std::to_string(ns_steps));
        require(std::isfinite(ns_a) && std::isfinite(ns_b) && std::isfinite(ns_c), ErrorCode::invalid_argument,
                "ns_a, ns_b and ns_c must be finite");
        require(int(adjust_lr) >= 0 && int(adjust_lr) <= int(MuonLrAdjust::spectral_unclamped),
                ErrorCode::invalid_argument, "adjust_lr " + std::to_string(int(adjust_lr)) + " is not a MuonLrAdjust");
        require(!nesterov || momentum > 0.0, ErrorCode::invalid_argument, "nesterov requires momentum > 0");
        require_range("adamw_lr", adamw_lr, 0.0);
        require_range("adamw_weight_decay", adamw_weight_decay, 0.0);
        require_range("adamw_eps", adamw_eps, 0.0);
        require_range("beta1", beta1, 0.0, true);
        require_range("beta2", beta2, 0.0, true);
        break;
    }
    require(int(state_precision) >= 0 && int(state_precision) <= int(StatePrecision::bits4), ErrorCode::invalid_argument,
            "state_precision " + std::to_string(int(state_precision)) + " is not a StatePrecision");
    if (state_precision != StatePrecision::full) {
        const bool lowbit_rule = kind == OptimizerKind::adam || kind == OptimizerKind::adamw ||
                                 (kind == OptimizerKind::sgd && momentum != 0.0);
        require(lowbit_rule, ErrorCode::invalid_argument,
                std::string("state_precision ") + state_precision_name(state_precision) +
                    " is only available for adam, adamw and sgd with momentum, not " + optimizer_kind_name(kind) +
                    (kind == OptimizerKind::sgd ? " without momentum (it has no state)" : ""));
        require(!amsgrad, ErrorCode::invalid_argument,
                "amsgrad keeps a running maximum of v, which low-bit state does not have: use state_precision full");
    }
    if (kind != OptimizerKind::sgd && kind != OptimizerKind::muon)
        require_flag_unset("nesterov", nesterov, kind, "sgd and muon");
    if (kind != OptimizerKind::nadam)
        require_flag_unset("decoupled_weight_decay", decoupled_weight_decay, kind, "nadam");
    if (kind != OptimizerKind::adam && kind != OptimizerKind::adamw)
        require_flag_unset("amsgrad", amsgrad, kind, "adam and adamw");
    if (kind != OptimizerKind::rmsprop) require_flag_unset("centered", centered, kind, "rmsprop");
}

Optimizer::Optimizer(const OptimizerOptions &options) : options_(options) {}

std::unique_ptr<Optimizer> Optimizer::create(const OptimizerOptions &options) {
    options.validate();
    if (options.state_precision != StatePrecision::full) return make_lowbit(options);
    switch (options.kind) {
    case OptimizerKind::sgd: return make_sgd(options);
    case OptimizerKind::adam:
    case OptimizerKind::adamw: return make_adam(options);
    case OptimizerKind::rmsprop: return make_rmsprop(options);
    case OptimizerKind::adagrad: return make_adagrad(options);
    case OptimizerKind::lamb: return make_lamb(options);
    case OptimizerKind::lion: return make_lion(options);
    case OptimizerKind::adafactor: return make_adafactor(options);
    case OptimizerKind::nadam: return make_nadam(options);
    case OptimizerKind::adamax: return make_adamax(options);
    case OptimizerKind::adadelta: return make_adadelta(options);
    case OptimizerKind::muon: return make_muon(options);
    }
    throw Error(ErrorCode::internal, "validated options with an unknown optimizer kind");
}

void Optimizer::set_lr(double lr) {
    require_range("lr", lr, 0.0);
    options_.lr = lr;
    lr_changed();
}

std::size_t Optimizer::lowbit_block() const noexcept {
    const OptimizerKind k = options_.kind;
    if (k != OptimizerKind::adam && k != OptimizerKind::adamw && k != OptimizerKind::sgd) return 0;
    return lowbit::block_elements(options_.state_precision);
}

// Only rules with per-tensor statistics have a first phase; calling it on others is a caller bug.
[[noreturn]] static void no_first_phase(OptimizerKind kind) {
    throw Error(ErrorCode::internal, std::string("begin_step called on ") + optimizer_kind_name(kind) +
                                         ", which has no per-tensor statistics");
}

void Optimizer::begin_step(const Segment<float> &, int64_t, double *) const { no_first_phase(kind()); }
void Optimizer::begin_step(const Segment<double> &, int64_t, double *) const { no_first_phase(kind()); }

[[noreturn]] static void no_phase(OptimizerKind kind, int phase) {
    throw Error(ErrorCode::internal, std::string("continue_step(") + std::to_string(phase) + ") called on " +
                                         optimizer_kind_name(kind) + ", which has no such phase");
}
void Optimizer::continue_step(int phase, const Segment<float> &, int64_t, double *) const { no_phase(kind(), phase); }
void Optimizer::continue_step(int phase, const Segment<double> &, int64_t, double *) const { no_phase(kind(), phase); }

[[noreturn]] static void no_transform(OptimizerKind kind) {
    throw Error(ErrorCode::internal, std::string("transform_matrix called on ") + optimizer_kind_name(kind) +
                                         ", which transforms no matrices");
}
void Optimizer::transform_matrix(float *, std::size_t, std::size_t) const { no_transform(kind()); }
void Optimizer::transform_matrix(double *, std::size_t, std::size_t) const { no_transform(kind()); }


} // namespace shardopt

// Base optimizers: update rules over (param, grad, state) ranges, so the same code updates a
// whole buffer (DDP) or one shard (ZeRO/FSDP). Formulas and defaults follow torch.optim
// (LAMB follows You et al. 2019 with bias-corrected moments and no clamp on the trust ratio).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "shardopt/types.hpp"

namespace shardopt {

// Values are part of the C ABI (shardopt_optimizer_kind): never renumber.
enum class OptimizerKind : int32_t { sgd = 0, adam = 1, adamw = 2, rmsprop = 3, adagrad = 4, lamb = 5 };
const char *optimizer_kind_name(OptimizerKind kind) noexcept;

struct OptimizerOptions {
    OptimizerKind kind = OptimizerKind::adam;
    double lr = 1e-3;
    double weight_decay = 0.0; // L2 for SGD/Adam/RMSprop/Adagrad, decoupled for AdamW/LAMB
    bool maximize = false;
    // SGD
    double momentum = 0.0;
    double dampening = 0.0;
    bool nesterov = false;
    // Adam, AdamW, LAMB
    double beta1 = 0.9;
    double beta2 = 0.999;
    double eps = 1e-8;
    bool amsgrad = false;
    // RMSprop (also uses momentum, eps)
    double alpha = 0.99;
    bool centered = false;
    // Adagrad (also uses eps)
    double lr_decay = 0.0;
    double initial_accumulator_value = 0.0;

    // torch.optim's defaults for `kind` (LAMB: lr 1e-3, eps 1e-6, weight_decay 0).
    static OptimizerOptions defaults(OptimizerKind kind);
    // Throws Error(invalid_argument) naming the bad field (negative lr, beta outside [0,1), ...).
    void validate() const;
};

// A contiguous slice of one tensor that this rank updates. state[k] points at slot k of the
// optimizer state for these same elements (state_slots() of them). The arrays must not overlap
// one another: the update loops are compiled on that assumption.
template <typename T> struct Segment {
    static constexpr int kMaxStateSlots = 4;
    T *param = nullptr;
    const T *grad = nullptr;
    T *state[kMaxStateSlots] = {};
    std::size_t count = 0;
    int tensor = 0; // index of the tensor the slice belongs to (for per-tensor statistics)
};

class Optimizer {
  public:
    virtual ~Optimizer() = default;
    static std::unique_ptr<Optimizer> create(const OptimizerOptions &options);

    const OptimizerOptions &options() const noexcept { return options_; }
    OptimizerKind kind() const noexcept { return options_.kind; }
    // Learning-rate schedules change lr between steps; other fields are fixed at creation.
    void set_lr(double lr);

    // Number of state arrays per parameter element (SGD without momentum 0, Adam 2, AMSGrad 3).
    virtual int state_slots() const = 0;
    // Initial value of state slot k (Adagrad's accumulator starts at initial_accumulator_value).
    virtual double state_initial_value(int slot) const { (void)slot; return 0.0; }

    // Per-tensor statistics that must be summed over every slice of a tensor (across ranks)
    // between begin_step and apply. 0 for element-wise rules; LAMB needs 2 (|w|^2, |update|^2).
    virtual int tensor_stats() const { return 0; }
    // Phase 1, only when tensor_stats() > 0: advance the state of seg and add its statistics
    // into stats[seg.tensor * tensor_stats() + k].
    virtual void begin_step(const Segment<float> &seg, int64_t step, double *stats) const;
    virtual void begin_step(const Segment<double> &seg, int64_t step, double *stats) const;
    // Phase 2 (the whole update for element-wise rules). step counts from 1. stats are the
    // summed per-tensor statistics (null when tensor_stats() == 0).
    virtual void apply(const Segment<float> &seg, int64_t step, const double *stats) const = 0;
    virtual void apply(const Segment<double> &seg, int64_t step, const double *stats) const = 0;

  protected:
    explicit Optimizer(const OptimizerOptions &options);
    OptimizerOptions options_;
};

} // namespace shardopt

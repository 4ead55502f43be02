// Base optimizers: update rules over (param, grad, state) ranges, so the same code updates a
// whole buffer (DDP) or one shard (ZeRO/FSDP). Formulas and defaults follow torch.optim
// (LAMB follows You et al. 2019 with bias-corrected moments and no clamp on the trust ratio;
// Lion follows Chen et al. 2023). docs/optimizers.md describes every rule and state format.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "shardopt/types.hpp"

namespace shardopt {

// Values are part of the C ABI (shardopt_optimizer_kind): never renumber.
enum class OptimizerKind : int32_t {
    sgd = 0, adam = 1, adamw = 2, rmsprop = 3, adagrad = 4, lamb = 5,
    lion = 6, adafactor = 7, nadam = 8, adamax = 9, adadelta = 10, muon = 11
};
const char *optimizer_kind_name(OptimizerKind kind) noexcept;

// How Adam, AdamW and SGD's momentum keep their state (the C ABI's shardopt_state_precision):
// in the parameters' type, or blockwise quantized from the GLOBAL tensor's element index
// (lowbit.hpp): 8-bit (bitsandbytes' dynamic map, 256-element blocks) or 4-bit (torchao's,
// 128-element blocks); tensors under 4096 elements keep full-precision state.
enum class StatePrecision : int32_t { full = 0, bits8 = 1, bits4 = 2 };
const char *state_precision_name(StatePrecision precision) noexcept;

// Muon's learning-rate scale for a rows x cols matrix (torch.optim.Muon's adjust_lr_fn).
enum class MuonLrAdjust : int32_t {
    original = 0,           // sqrt(max(1, rows / cols)) (Keller Jordan's)
    match_rms_adamw = 1,    // 0.2 * sqrt(max(rows, cols)) (Moonshot's)
    spectral_unclamped = 2, // sqrt(rows / cols) (Bernstein's)
};

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
    // Adam, AdamW, SGD with momentum: full, 8-bit or 4-bit state (not with amsgrad).
    StatePrecision state_precision = StatePrecision::full;
    // NAdam (also betas, eps)
    double momentum_decay = 4e-3;
    bool decoupled_weight_decay = false;
    // Adadelta (also eps)
    double rho = 0.9;
    // Adafactor: eps is torch's eps1 (0: the parameters' machine epsilon, torch's None); eps2,
    // beta2_decay and clip_threshold (torch's d).
    double beta2_decay = -0.8;
    double eps2 = 1e-3;
    double clip_threshold = 1.0;
    // Muon on matrices (momentum, nesterov; eps guards the Newton-Schulz normalization):
    int ns_steps = 5;
    double ns_a = 3.4445, ns_b = -4.7750, ns_c = 2.0315;
    MuonLrAdjust adjust_lr = MuonLrAdjust::original;
    // ... and AdamW (beta1, beta2 and these) on every other tensor, as torch.optim.Muon documents.
    double adamw_lr = 1e-3;
    double adamw_weight_decay = 1e-2;
    double adamw_eps = 1e-8;

    // torch.optim's defaults for `kind` (LAMB: lr 1e-3, eps 1e-6, weight_decay 0; Lion: lr 1e-4,
    // betas 0.9 / 0.99).
    static OptimizerOptions defaults(OptimizerKind kind);
    // Throws Error(invalid_argument) naming the bad field (negative lr, beta outside [0,1), ...).
    void validate() const;
};

// The tensor a slice belongs to: `count` elements, a rows x (count / rows) row-major matrix when
// rows > 0 (ParameterSet::add_matrix). shared_blocks: blocks of its low-bit state that lie on
// more than one rank (a shard boundary inside them), counted by the engine for the rules whose
// statistics need them.
struct TensorShape {
    std::size_t count = 0;
    std::size_t rows = 0;
    std::size_t shared_blocks = 0;
    bool matrix() const noexcept { return rows > 0 && count >= rows; }
    std::size_t cols() const noexcept { return rows > 0 ? count / rows : 0; }
};

// One low-bit state array over a slice (lowbit.hpp): blocks are counted from the slice's first
// block, whose first element is element offset - offset % block of the tensor. Element i's code
// is code number offset % block + i of `codes` (8-bit: one byte each; 4-bit: two a byte, the
// even one in the low nibble); block j's scale (its absolute maximum) is scales[j].
struct LowBitArray {
    std::uint8_t *codes = nullptr;
    float *scales = nullptr;
};

// A contiguous slice of one tensor that this rank updates. state[k] points at slot k of the
// optimizer state for these same elements (state_slots() of them). The arrays must not overlap
// one another: the update loops are compiled on that assumption.
template <typename T> struct Segment {
    static constexpr int kMaxStateSlots = 4;
    static constexpr int kMaxPhases = 2;
    static constexpr std::size_t npos = ~std::size_t(0);
    T *param = nullptr;
    const T *grad = nullptr;
    T *state[kMaxStateSlots] = {};
    std::size_t count = 0;
    int tensor = 0; // index of the tensor the slice belongs to (for per-tensor statistics)
    // Where the slice lies: param[0] is element `offset` of a tensor of `shape` (shape.count 0:
    // the slice is the whole tensor). Low-bit blocks, matrix rows and columns count from there.
    std::size_t offset = 0;
    TensorShape shape;
    // Where the tensor's statistics of each phase start in the step's buffer (stat_phases()).
    std::size_t stats[kMaxPhases] = {};
    // Low-bit slots: lowbit[k].codes is set where slot k is quantized (state[k] is then null).
    LowBitArray lowbit[kMaxStateSlots] = {};
    // Which of the tensor's shared blocks the slice's first and last block are (npos: not shared).
    std::size_t shared_first = npos, shared_last = npos;
    // This rank's copy of the tensor's own state (tensor_state() values, e.g. Adafactor's row and
    // column variances), shared by every slice of the tensor on the rank.
    T *tensor_state = nullptr;
    // Matrix rules (Muon): this slice's part of the matrix the step transforms whole: begin_step
    // writes it, the transform runs over the whole matrix, apply reads the result.
    T *matrix = nullptr;

    // The tensor's element count (shape.count, or count when no shape was given).
    std::size_t tensor_count() const noexcept { return shape.count ? shape.count : offset + count; }
};

class Optimizer {
  public:
    virtual ~Optimizer() = default;
    static std::unique_ptr<Optimizer> create(const OptimizerOptions &options);

    const OptimizerOptions &options() const noexcept { return options_; }
    OptimizerKind kind() const noexcept { return options_.kind; }
    // Learning-rate schedules change lr between steps; other fields are fixed at creation.
    void set_lr(double lr);

    // Number of state arrays per parameter element (SGD without momentum 0, Adam 2, AMSGrad 3):
    // the most any tensor has.
    virtual int state_slots() const = 0;
    // The arrays a tensor of `shape` has, slots 0 .. n-1 (Muon: 1 on matrices, AdamW's 2
    // elsewhere; Adafactor: none on matrices, whose state is per tensor).
    virtual int state_slots(const TensorShape &shape) const { (void)shape; return state_slots(); }
    // Initial value of state slot k (Adagrad's accumulator starts at initial_accumulator_value).
    virtual double state_initial_value(int slot) const { (void)slot; return 0.0; }
    // Whether slot k of a tensor of `shape` is kept low-bit (Segment::lowbit), in blocks of
    // lowbit_block() elements counted from the tensor's first element.
    virtual bool quantized(int slot, const TensorShape &shape) const { (void)slot; (void)shape; return false; }
    std::size_t lowbit_block() const noexcept;
    // Values of state a rank keeps whole for each tensor it holds part of (Segment::tensor_state;
    // Adafactor: the rows + cols variances of a matrix), initially 0.
    virtual std::size_t tensor_state(const TensorShape &shape) const { (void)shape; return 0; }

    // Per-tensor statistics that must be combined over every slice of a tensor (across ranks)
    // between the phases of a step. 0 for element-wise rules; LAMB needs 2 (|w|^2, |update|^2).
    virtual int tensor_stats() const { return 0; }
    // The general form: stat_phases() rounds, phase p adding phase_stats(p, shape) values per
    // tensor at seg.stats[p] of the step's buffer, combined across slices with phase_op(p) before
    // phase p + 1 (or apply) runs. LAMB: one round of tensor_stats() sums; Adafactor: two; low-bit
    // state: one of maxima over the blocks shared between ranks.
    virtual int stat_phases() const { return tensor_stats() > 0 ? 1 : 0; }
    virtual std::size_t phase_stats(int phase, const TensorShape &shape) const {
        (void)phase; (void)shape;
        return std::size_t(tensor_stats());
    }
    virtual ReduceOp phase_op(int phase) const { (void)phase; return ReduceOp::sum; }
    // Rules that transform whole matrices between begin_step and apply (Muon): begin_step writes
    // Segment::matrix, the caller runs transform_matrix once over each whole matrix (its rows x
    // cols values assembled from every slice), and apply reads the result from Segment::matrix.
    virtual bool transforms_matrices() const { return false; }
    virtual void transform_matrix(float *data, std::size_t rows, std::size_t cols) const;
    virtual void transform_matrix(double *data, std::size_t rows, std::size_t cols) const;
    // Whether begin_step must run (statistics, or a matrix to write).
    bool has_first_phase() const { return stat_phases() > 0 || transforms_matrices(); }

    // Phase 1, only when has_first_phase(): advance the state of seg and add its statistics
    // into stats (LAMB: stats[seg.stats[0] + k]; null when there are none).
    virtual void begin_step(const Segment<float> &seg, int64_t step, double *stats) const;
    virtual void begin_step(const Segment<double> &seg, int64_t step, double *stats) const;
    // Phases 2 .. stat_phases() (phase counted from 0), once every earlier phase was combined.
    virtual void continue_step(int phase, const Segment<float> &seg, int64_t step, double *stats) const;
    virtual void continue_step(int phase, const Segment<double> &seg, int64_t step, double *stats) const;
    // The last phase (the whole update for element-wise rules). step counts from 1. stats are the
    // combined statistics (null when there are none).
    virtual void apply(const Segment<float> &seg, int64_t step, const double *stats) const = 0;
    virtual void apply(const Segment<double> &seg, int64_t step, const double *stats) const = 0;

  protected:
    explicit Optimizer(const OptimizerOptions &options);
    // After set_lr changed options_.lr (rules that hold other rules pass it on).
    virtual void lr_changed() {}
    OptimizerOptions options_;
};

} // namespace shardopt

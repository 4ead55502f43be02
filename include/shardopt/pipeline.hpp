// Pipeline parallelism: the pipeline dimension of the hybrid optimizer, executed.
//
// The caller owns the model. Each pipeline rank runs a PipelineStage: the forward and backward
// of its model chunks (one per rank, or virtual_stages of them for interleaved 1F1B). A
// PipelineRunner drives one batch at a time through a schedule (pipeline_schedule.hpp):
// activations and their gradients travel between neighbouring stages with the pipeline
// group's send/recv (asynchronous: the next input is received while the current one is
// computed), the parameter gradients of every micro-batch are summed, and the batch ends with
// exactly one optimizer step on their mean, composed with whatever strategy the hybrid grid runs
// inside each stage's data-parallel group (DDP, ZeRO-1/2, FSDP).
//
//   auto opt = ShardedOptimizer::create(world, my_stage_layout, adam, hybrid_with_pp, init);
//   PipelineRunner runner(*opt, my_stage, {/*num_micro_batches*/ 8, PipelineSchedule::one_f_one_b});
//   for (...) { my_stage.set_batch(...); auto r = runner.run_batch(); }   // r.loss, r.bubble_fraction
//
// Activations have the optimizer's parameter dtype. The element count each chunk sends for each
// micro-batch is agreed with its neighbour on the first batch (a count message ahead of the
// data) and must stay the same afterwards (Error(mismatch) otherwise).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "shardopt/pipeline_schedule.hpp"
#include "shardopt/sharded_optimizer.hpp"

namespace shardopt {

struct PipelineOptions {
    int num_micro_batches = 0; // 0 = the pipeline depth
    PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
    int virtual_stages = 1; // model chunks per rank: interleaved_1f1b only (>= 2 there)
};

// An activation or its gradient: count() elements of dtype(), owned by the runner.
class Activation {
  public:
    explicit Activation(DType dtype) : dtype_(dtype) {}
    DType dtype() const noexcept { return dtype_; }
    std::size_t count() const noexcept { return count_; }
    void *data() noexcept { return bytes_.data(); }
    const void *data() const noexcept { return bytes_.data(); }
    // Sets the element count (contents unspecified) and returns data().
    void *resize(std::size_t count);
    template <typename T> T *as() { return static_cast<T *>(data()); }
    template <typename T> const T *as() const { return static_cast<const T *>(data()); }

  private:
    DType dtype_;
    std::size_t count_ = 0;
    std::vector<unsigned char> bytes_;
};

// What one forward or backward call is about.
struct StageCall {
    int micro_batch = 0;
    int chunk = 0;       // this rank's chunk, 0..virtual_stages-1
    int model_chunk = 0; // its place in the model: chunk * pp_size + pp_rank
    bool first = false;  // the model's first chunk: no input activation
    bool last = false;   // the model's last chunk: computes the loss, no output activation
    // The stage's optimizer: parameters through tensor_parameters(t) or, under FSDP,
    // gather(unit) / release(unit).
    ShardedOptimizer *optimizer = nullptr;
    // Gradient of tensor t, summed over this batch's micro-batches: backward adds into it
    // (host memory, the layout's dtype, layout().tensor(t).count elements).
    void *grad(int t) const;

    unsigned char *gradients = nullptr; // the runner's sum (padded flat layout)
};

class PipelineStage {
  public:
    virtual ~PipelineStage() = default;
    // Forward of call.chunk on call.micro_batch: `input` (empty on the model's first chunk) ->
    // `output` (the stage resizes it; left empty on the model's last chunk). Returns the
    // micro-batch's loss on the model's last chunk (ignored elsewhere). The runner keeps `input`
    // until the matching backward.
    virtual double forward(const StageCall &call, const Activation &input, Activation &output) = 0;
    // Backward of the same chunk and micro-batch: `output_grad` is the gradient of the output
    // (empty on the model's last chunk, which differentiates its loss); writes the gradient of
    // `input` into `input_grad` (sized like input; nothing on the first chunk) and adds the
    // parameter gradients into call.grad(t).
    virtual void backward(const StageCall &call, const Activation &input, const Activation &output_grad,
                          Activation &input_grad) = 0;
};

struct PipelineBatchResult {
    // Mean over the micro-batches of the last chunk's losses (every rank of the pipeline gets it).
    double loss = 0.0;
    StepResult step; // the one optimizer step of the batch
    // This rank: time inside the stage's forward/backward, time waiting for activations and
    // gradients, and the span from the batch's start to the end of its last action.
    double busy_seconds = 0.0;
    double wait_seconds = 0.0;
    double span_seconds = 0.0;
    // The whole pipeline: 1 - (busy time summed over stages) / (stages x longest span).
    double bubble_fraction = 0.0;
    int peak_activations = 0; // most forwards held before their backward, on this rank
    int sends = 0, recvs = 0; // activation and gradient messages of this rank (count messages not included)
};

class PipelineRunner {
  public:
    // Collective over the optimizer's pipeline group (its ranks must agree on the options:
    // Error(mismatch) otherwise). The optimizer holds this rank's chunks (pp_size from its grid;
    // pp 1 when not hybrid), in host memory, f32 or f64, with gradient_accumulation_steps 1
    // (the runner accumulates over micro-batches). Both must outlive the runner.
    PipelineRunner(ShardedOptimizer &optimizer, PipelineStage &stage, const PipelineOptions &options);
    ~PipelineRunner();
    PipelineRunner(const PipelineRunner &) = delete;
    PipelineRunner &operator=(const PipelineRunner &) = delete;

    // One batch: every micro-batch forward and backward as the schedule orders them, then one
    // optimizer step. Collective over the optimizer's world. On any failure (the stage threw, a
    // neighbour failed, a shape changed) the pipeline group is aborted, so every stage stops with
    // the reason instead of waiting out its timeout, and the error is rethrown.
    PipelineBatchResult run_batch();

    const PipelineShape &shape() const noexcept { return shape_; }
    int stage_rank() const noexcept { return rank_; }
    const std::vector<PipelineAction> &actions() const noexcept { return actions_; }

  private:
    class Batch; // one run_batch's state (runner.cpp)
    ShardedOptimizer &optimizer_;
    PipelineStage &stage_;
    PipelineShape shape_;
    int rank_ = 0;
    CommunicatorPtr pipe_; // null for a single stage
    std::vector<PipelineAction> actions_;
    std::vector<unsigned char> gradients_;
    // Element count of the activation model chunk k sends for micro-batch mb (k * m + mb); -1
    // until agreed on the first batch.
    std::vector<std::int64_t> agreed_;
};

} // namespace shardopt

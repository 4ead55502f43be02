// Pipeline parallelism through the C ABI (experimental part): a stage given as callbacks, run by
// a shardopt::PipelineRunner.
#include <string>

#include "capi_internal.hpp"
#include "shardopt/pipeline.hpp"

using namespace shardopt;
using namespace shardopt::capi;

// The runner's output activation, as the forward callback sees it.
struct shardopt_activation_s {
    Activation *activation;
};

namespace {

constexpr std::uint32_t kPipelineTag = 0x70697065;

// The C callbacks as a PipelineStage. A callback that fails aborts the batch with its code (and
// the reason it gave through shardopt_model_error).
class CallbackStage final : public PipelineStage {
  public:
    explicit CallbackStage(const shardopt_pipeline_stage &s) : s_(s) {}

    double forward(const StageCall &call, const Activation &input, Activation &output) override {
        shardopt_stage_call c = to_c(call);
        shardopt_activation_s out{&output};
        double loss = 0.0;
        check(s_.forward(s_.user_data, &c, input.data(), input.count(), &out, &loss), "forward", call);
        return loss;
    }
    void backward(const StageCall &call, const Activation &input, const Activation &output_grad,
                  Activation &input_grad) override {
        shardopt_stage_call c = to_c(call);
        check(s_.backward(s_.user_data, &c, input.data(), input.count(), output_grad.data(), output_grad.count(),
                          input_grad.data()),
              "backward", call);
    }

  private:
    static shardopt_stage_call to_c(const StageCall &call) {
        shardopt_stage_call c{};
        c.struct_size = sizeof c;
        c.micro_batch = call.micro_batch;
        c.chunk = call.chunk;
        c.model_chunk = call.model_chunk;
        c.first = call.first;
        c.last = call.last;
        c.internal = const_cast<StageCall *>(&call);
        return c;
    }
    static void check(int rc, const char *which, const StageCall &call) {
        if (rc == 0) return;
        std::string why = std::string(which) + " callback returned " + std::to_string(rc) + " for micro-batch " +
                          std::to_string(call.micro_batch) + " of model chunk " + std::to_string(call.model_chunk);
        const std::string reason = take_model_error();
        if (!reason.empty()) why += ": " + reason;
        throw Error(ErrorCode::invalid_state, why);
    }
    shardopt_pipeline_stage s_;
};

} // namespace

struct shardopt_pipeline_s {
    std::uint32_t tag = kPipelineTag;
    shardopt_optimizer_s *opt = nullptr; // its optimizer's handle, busy while a batch runs
    std::atomic<bool> running{false};
    std::unique_ptr<CallbackStage> stage;
    std::unique_ptr<PipelineRunner> runner;
};

namespace {
shardopt_pipeline_s *pipeline_of(shardopt_pipeline p) {
    require(p != nullptr, ErrorCode::invalid_argument, "pipeline handle is NULL");
    require(p->tag == kPipelineTag, ErrorCode::invalid_argument, "pipeline handle is invalid (destroyed?)");
    return p;
}
} // namespace

extern "C" {

SHARDOPT_API shardopt_status shardopt_pipeline_create(shardopt_optimizer opt, const shardopt_pipeline_stage *stage,
                                                      const shardopt_pipeline_options *options,
                                                      shardopt_pipeline *out) {
    return guard(__func__, [&] {
        not_null(out, "out");
        *out = nullptr;
        ShardedOptimizer &o = opt_of(opt);
        const shardopt_pipeline_stage s = read_struct(stage, "pipeline stage", sizeof(std::size_t));
        require(s.forward != nullptr && s.backward != nullptr, ErrorCode::invalid_argument,
                "pipeline stage: forward and backward callbacks must both be set");
        const shardopt_pipeline_options po = read_struct(options, "pipeline options", sizeof(std::size_t));
        PipelineOptions cpp;
        cpp.num_micro_batches = po.num_micro_batches;
        require(po.schedule >= SHARDOPT_PIPELINE_1F1B && po.schedule <= SHARDOPT_PIPELINE_INTERLEAVED_1F1B,
                ErrorCode::invalid_argument, "pipeline options: invalid schedule " + std::to_string(int(po.schedule)));
        cpp.schedule = PipelineSchedule(po.schedule);
        cpp.virtual_stages = po.virtual_stages != 0 ? po.virtual_stages
                                                    : (po.schedule == SHARDOPT_PIPELINE_INTERLEAVED_1F1B ? 2 : 1);
        require(po.num_micro_batches >= 0, ErrorCode::invalid_argument,
                "pipeline options: num_micro_batches must be >= 0 (0 = the pipeline depth)");
        auto handle = std::make_unique<shardopt_pipeline_s>();
        handle->stage = std::make_unique<CallbackStage>(s);
        handle->runner = std::make_unique<PipelineRunner>(o, *handle->stage, cpp);
        handle->opt = opt;
        *out = handle.release();
    });
}

SHARDOPT_API shardopt_status shardopt_pipeline_destroy(shardopt_pipeline pipeline) {
    return guard(__func__, [&] {
        if (!pipeline) return;
        require(!pipeline_of(pipeline)->running, ErrorCode::invalid_state,
                "not while a batch of this pipeline is running (called from a stage callback?)");
        pipeline->tag = 0;
        delete pipeline;
    });
}

SHARDOPT_API shardopt_status shardopt_pipeline_run_batch(shardopt_pipeline pipeline, shardopt_pipeline_result *result) {
    return guard(__func__, [&] {
        shardopt_pipeline_s *p = pipeline_of(pipeline);
        if (result) check_out_struct(result, "pipeline result");
        opt_of(p->opt); // refused while it trains or runs a batch (from a stage: run_batch again)
        BusyCall busy(p->opt, true);
        p->running = true;
        struct Done {
            shardopt_pipeline_s *p;
            ~Done() { p->running = false; }
        } done{p};
        const PipelineBatchResult r = p->runner->run_batch();
        if (!result) return;
        shardopt_pipeline_result out{};
        out.loss = r.loss;
        out.step_applied = r.step.applied;
        out.busy_seconds = r.busy_seconds;
        out.wait_seconds = r.wait_seconds;
        out.span_seconds = r.span_seconds;
        out.bubble_fraction = r.bubble_fraction;
        out.peak_activations = r.peak_activations;
        out.sends = r.sends;
        out.recvs = r.recvs;
        write_struct(result, out, "pipeline result");
    });
}

SHARDOPT_API shardopt_status shardopt_activation_resize(shardopt_activation output, size_t count, void **data) {
    return guard(__func__, [&] {
        require(output != nullptr && output->activation != nullptr, ErrorCode::invalid_argument, "output is NULL");
        void *p = output->activation->resize(count);
        if (data) *data = p;
    });
}

SHARDOPT_API shardopt_status shardopt_stage_call_grad(const shardopt_stage_call *call, int tensor, void **grad,
                                                      size_t *count) {
    return guard(__func__, [&] {
        require(call != nullptr && call->internal != nullptr, ErrorCode::invalid_argument,
                "call is NULL or not a pipeline callback's");
        not_null(grad, "grad");
        const StageCall &c = *static_cast<const StageCall *>(call->internal);
        const auto &layout = c.optimizer->layout();
        require(tensor >= 0 && tensor < layout.tensor_count(), ErrorCode::invalid_argument,
                "tensor " + std::to_string(tensor) + " is out of range [0, " + std::to_string(layout.tensor_count()) + ")");
        *grad = c.grad(tensor);
        if (count) *count = layout.tensor(tensor).count;
    });
}

} // extern "C"

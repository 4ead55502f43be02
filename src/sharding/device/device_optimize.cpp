// The device engine as the target of the shared optimize() loop.
#include "../optimize_loop.hpp"
#include "device_engine.hpp"

namespace shardopt::device {
namespace {

class DeviceOptimizeTarget final : public OptimizeTarget {
  public:
    DeviceOptimizeTarget(DeviceEngine &engine, DeviceSpace &space) : engine_(engine), space_(space) {}
    const ParameterSet &layout() const override { return engine_.layout(); }
    int data_rank() const override { return engine_.grid().data->rank(); }
    int data_size() const override { return engine_.grid().data->size(); }
    void get_parameters(void *packed) override { engine_.get_parameters(packed); }
    void step_with(const unsigned char *packed_grad) override {
        const ParameterSet &layout = engine_.layout();
        const std::size_t elem = layout.element_size();
        engine_.zero_grad();
        std::size_t packed = 0;
        for (int b = 0; b < layout.bucket_count(); ++b) {
            const auto &bl = layout.bucket(b);
            // After bucket_grad's clearing, on the same stream.
            space_.copy_from_host(engine_.bucket_grad(b), packed_grad + packed * elem, bl.count * elem);
            packed += bl.count;
            engine_.grad_ready(b);
        }
        engine_.step();
    }
    double average_over_data(double value) override {
        return space_.allreduce_scalar(*engine_.grid().data, value, ReduceOp::avg);
    }
    bool should_early_stop(bool local_vote) override { return engine_.should_early_stop(local_vote); }

  private:
    DeviceEngine &engine_;
    DeviceSpace &space_;
};

} // namespace

OptimizeResult DeviceEngine::optimize(const ModelFunction &model, const OptimizeOptions &options) {
    DeviceOptimizeTarget target(*this, *space_);
    return run_optimize_loop(target, model, options);
}

} // namespace shardopt::device

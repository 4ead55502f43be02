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
        // Each copy follows bucket_grad's clearing on the compute stream.
        step_on_packed_gradient(engine_, packed_grad, [&](void *dst, const void *src, std::size_t bytes) {
            space_.copy_from_host(dst, src, bytes);
        });
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

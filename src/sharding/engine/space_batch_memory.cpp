#include "space_batch_memory.hpp"

namespace shardopt::engine {
namespace {

class SpaceBatchMemory final : public training::BatchMemory {
  public:
    SpaceBatchMemory(Space &space, ParameterStore &params, const ParameterSet &layout, void *stream)
        : space_(space), store_(params), layout_(layout), bytes_(layout.element_count() * layout.element_size()),
          params_(space.allocate(bytes_, "the model's batch parameters (device_batches)")),
          grad_(space.allocate(bytes_, "the model's batch gradient (device_batches)")), stream_(stream) {}

    void *params() noexcept override { return params_->data(); }
    void *grad() noexcept override { return grad_->data(); }
    bool on_device() const noexcept override { return true; }
    void describe(Batch &b) const noexcept override {
        b.on_device = true;
        b.device = space_.device();
        b.cuda_stream = stream_;
    }

    void read_parameters() override { store_.get(params_->data(), /*in_space=*/true); }
    void load(const void *packed_host) override { space_.copy_from_host(params_->data(), packed_host, bytes_); }
    void store(void *packed_host) override { space_.copy_to_host(packed_host, params_->data(), bytes_); }
    void clear_grad() override { space_.zero(grad_->data(), bytes_); }
    void scale_grad(double factor) override {
        space_.scale(grad_->data(), layout_.element_count(), layout_.dtype(), factor);
    }

  private:
    Space &space_;
    ParameterStore &store_;
    const ParameterSet &layout_;
    std::size_t bytes_;
    SpaceBufferPtr params_, grad_;
    void *stream_;
};

} // namespace

std::unique_ptr<training::BatchMemory> space_batch_memory(Space &space, ParameterStore &params,
                                                          const ParameterSet &layout, void *stream) {
    return std::make_unique<SpaceBatchMemory>(space, params, layout, stream);
}

} // namespace shardopt::engine

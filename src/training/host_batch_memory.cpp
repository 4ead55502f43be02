// The model's batches in host memory: packed copies the model reads and writes directly.
#include <cstring>
#include <vector>

#include "../optim/vector_ops.hpp"
#include "shardopt/error.hpp"
#include "batch_memory.hpp"
#include "trainee.hpp"

namespace shardopt::training {
namespace {

class HostBatchMemory final : public BatchMemory {
  public:
    explicit HostBatchMemory(Trainee &trainee)
        : trainee_(trainee), bytes_(trainee.layout().element_count() * trainee.layout().element_size()),
          params_(bytes_), grad_(bytes_) {}

    void *params() noexcept override { return params_.data(); }
    void *grad() noexcept override { return grad_.data(); }
    bool on_device() const noexcept override { return false; }
    void describe(Batch &) const noexcept override {}

    void read_parameters() override { trainee_.get_parameters(params_.data()); }
    void load(const void *packed_host) override { std::memcpy(params_.data(), packed_host, bytes_); }
    void store(void *packed_host) override { std::memcpy(packed_host, params_.data(), bytes_); }
    void clear_grad() override { std::memset(grad_.data(), 0, bytes_); }
    void scale_grad(double factor) override {
        const ParameterSet &layout = trainee_.layout();
        scale(grad_.data(), layout.element_count(), layout.dtype(), factor);
    }

  private:
    Trainee &trainee_;
    std::size_t bytes_;
    std::vector<unsigned char> params_, grad_;
};

} // namespace

std::unique_ptr<BatchMemory> host_batch_memory(Trainee &trainee) { return std::make_unique<HostBatchMemory>(trainee); }

std::unique_ptr<BatchMemory> Trainee::batch_memory(bool on_device) {
    require(!on_device, ErrorCode::invalid_argument,
            "train: device_batches needs an optimizer in cuda memory (this one keeps its parameters in host memory; "
            "leave device_batches off, and the model gets host copies)");
    return host_batch_memory(*this);
}

} // namespace shardopt::training

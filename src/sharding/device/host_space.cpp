#include "host_space.hpp"

#include <cstring>
#include <string>

#include "../../params/aligned_buffer.hpp"
#include "../vector_ops.hpp"
#include "shardopt/error.hpp"

namespace shardopt::device {
namespace {

class HostBuffer final : public SpaceBuffer {
  public:
    explicit HostBuffer(std::size_t bytes) : buffer_(bytes) {}
    unsigned char *data() const noexcept override { return const_cast<unsigned char *>(buffer_.data()); }
    std::size_t bytes() const noexcept override { return buffer_.size(); }

  private:
    AlignedBuffer buffer_;
};

// The reference rules over the spans, one state array per slot and span (as the CPU engine
// lays out its state, so the arithmetic is the same). LAMB's per-tensor statistics are taken
// per span: the engine gives it whole tensors only.
class HostUpdater final : public SpanUpdater {
  public:
    HostUpdater(const std::vector<Span> &params, const OptimizerOptions &options)
        : optimizer_(Optimizer::create(options)) {
        const int slots = optimizer_->state_slots();
        for (std::size_t i = 0; i < params.size(); ++i) {
            Segment<float> seg;
            seg.param = reinterpret_cast<float *>(params[i].data);
            seg.count = params[i].count;
            seg.tensor = int(i);
            for (int k = 0; k < slots; ++k) {
                state_.emplace_back(params[i].count * sizeof(float));
                auto *s = reinterpret_cast<float *>(state_.back().data());
                const float init = float(optimizer_->state_initial_value(k));
                for (std::size_t e = 0; e < params[i].count; ++e) s[e] = init;
                seg.state[k] = s;
                state_bytes_ += state_.back().size();
            }
            segments_.push_back(seg);
        }
    }

    void step(const std::vector<const void *> &grads) override {
        require(grads.size() == segments_.size(), ErrorCode::invalid_argument,
                "updater: " + std::to_string(grads.size()) + " gradients for " + std::to_string(segments_.size()) +
                    " spans");
        ++steps_;
        for (std::size_t i = 0; i < segments_.size(); ++i) segments_[i].grad = static_cast<const float *>(grads[i]);
        const int per_tensor = optimizer_->tensor_stats();
        std::vector<double> stats(segments_.size() * std::size_t(per_tensor), 0.0);
        if (per_tensor > 0)
            for (const auto &seg : segments_) optimizer_->begin_step(seg, steps_, stats.data());
        for (const auto &seg : segments_) optimizer_->apply(seg, steps_, per_tensor > 0 ? stats.data() : nullptr);
    }

    void set_lr(double lr) override { optimizer_->set_lr(lr); }
    std::size_t state_bytes() const noexcept override { return state_bytes_; }
    int state_slots() const noexcept override { return optimizer_->state_slots(); }
    void read_state(int span, int slot, float *host) override {
        const auto &seg = segments_.at(std::size_t(span));
        require(slot >= 0 && slot < state_slots(), ErrorCode::invalid_argument, "no state slot " + std::to_string(slot));
        std::memcpy(host, seg.state[slot], seg.count * sizeof(float));
    }
    void write_state(int span, int slot, const float *host) override {
        const auto &seg = segments_.at(std::size_t(span));
        require(slot >= 0 && slot < state_slots(), ErrorCode::invalid_argument, "no state slot " + std::to_string(slot));
        std::memcpy(seg.state[slot], host, seg.count * sizeof(float));
    }
    void set_step_count(std::int64_t steps) override {
        require(steps >= 0, ErrorCode::invalid_argument, "step count must be >= 0");
        steps_ = steps;
    }

  private:
    std::unique_ptr<Optimizer> optimizer_;
    std::vector<AlignedBuffer> state_;
    std::vector<Segment<float>> segments_;
    std::size_t state_bytes_ = 0;
    std::int64_t steps_ = 0;
};

class HostSpace final : public DeviceSpace {
  public:
    const char *name() const noexcept override { return "host"; }
    SpaceBufferPtr allocate(std::size_t bytes, const char *) override { return std::make_unique<HostBuffer>(bytes); }
    void zero(void *data, std::size_t bytes) override {
        if (bytes) std::memset(data, 0, bytes);
    }
    void add_into(void *dst, const void *src, std::size_t count, DType dtype) override {
        shardopt::add_into(dst, src, count, dtype);
    }
    void scale(void *data, std::size_t count, DType dtype, double factor) override {
        shardopt::scale(data, count, dtype, factor);
    }
    double sum_of_squares(const std::vector<Span> &spans, DType dtype) override {
        double total = 0.0;
        for (const auto &s : spans) total += shardopt::sum_of_squares(s.data, s.count, dtype);
        return total;
    }
    void copy_from_host(void *dst, const void *host, std::size_t bytes) override {
        if (bytes) std::memcpy(dst, host, bytes);
    }
    void copy_to_host(void *host, const void *src, std::size_t bytes) override {
        if (bytes) std::memcpy(host, src, bytes);
    }
    void before_collective(Communicator &) override {} // one timeline: nothing to order
    CommunicatorPtr host_access(CommunicatorPtr comm) override { return comm; } // host buffers already
    double allreduce_scalar(Communicator &comm, double value, ReduceOp op) override {
        double result = value;
        comm.allreduce(&value, &result, 1, DType::f64, op);
        return result;
    }
    std::unique_ptr<SpanUpdater> make_updater(const std::vector<Span> &params, DType dtype,
                                              const OptimizerOptions &options) override {
        require(dtype == DType::f32, ErrorCode::invalid_argument,
                std::string("host space updates f32 parameters, got ") + dtype_name(dtype));
        return std::make_unique<HostUpdater>(params, options);
    }
    void synchronize() override {}
};

} // namespace

std::unique_ptr<DeviceSpace> make_host_space() { return std::make_unique<HostSpace>(); }

} // namespace shardopt::device

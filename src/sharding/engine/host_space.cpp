#include "host_space.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "../../optim/lowbit.hpp"
#include "../../optim/parallel_update.hpp"
#include "../../params/aligned_buffer.hpp"
#include "../../optim/vector_ops.hpp"
#include "shardopt/error.hpp"

namespace shardopt::engine {
namespace {

class HostBuffer final : public SpaceBuffer {
  public:
    explicit HostBuffer(std::size_t bytes) : buffer_(bytes) {}
    unsigned char *data() const noexcept override { return const_cast<unsigned char *>(buffer_.data()); }
    std::size_t bytes() const noexcept override { return buffer_.size(); }

  private:
    AlignedBuffer buffer_;
};

// The reference rule over the spans, one state array per slot and span (or, for a slot the rule
// keeps low-bit, its codes and block scales). The update of one bucket is spread over the space's
// threads; ParallelUpdate keeps it bitwise the same for any thread count, and runs the rules'
// statistics phases on the calling thread in span order.
template <typename T> class HostUpdater final : public SpanUpdater {
  public:
    HostUpdater(const std::vector<Span> &params, const OptimizerOptions &options, ParallelUpdate &threads)
        : optimizer_(Optimizer::create(options)), precision_(options.state_precision), threads_(threads) {
        const int slots = optimizer_->state_slots();
        for (const Span &span : params) {
            Segment<T> seg;
            seg.param = reinterpret_cast<T *>(span.data);
            seg.count = span.count;
            seg.tensor = span.tensor;
            seg.offset = span.offset;
            seg.shape = span.shape;
            for (int p = 0; p < Segment<T>::kMaxPhases; ++p) seg.stats[p] = span.stats[p];
            seg.shared_first = span.shared_first;
            seg.shared_last = span.shared_last;
            for (int k = 0; k < slots; ++k) {
                if (optimizer_->quantized(k, span.shape)) { // codes and scales, all zero: state 0
                    const std::size_t codes = lowbit::code_bytes(precision_, span.offset, span.count);
                    const std::size_t blocks = lowbit::blocks_touched(precision_, span.offset, span.count);
                    state_.emplace_back(codes + blocks * sizeof(float));
                    std::memset(state_.back().data(), 0, state_.back().size());
                    seg.lowbit[k].scales = reinterpret_cast<float *>(state_.back().data());
                    seg.lowbit[k].codes = state_.back().data() + blocks * sizeof(float);
                } else {
                    state_.emplace_back(span.count * sizeof(T));
                    auto *s = reinterpret_cast<T *>(state_.back().data());
                    const T init = T(optimizer_->state_initial_value(k));
                    for (std::size_t e = 0; e < span.count; ++e) s[e] = init;
                    seg.state[k] = s;
                }
                state_bytes_ += state_.back().size();
            }
            segments_.push_back(seg);
        }
    }

    void begin_step(const std::vector<const void *> &grads, double *stats) override {
        require(grads.size() == segments_.size(), ErrorCode::invalid_argument,
                "updater: " + std::to_string(grads.size()) + " gradients for " + std::to_string(segments_.size()) +
                    " spans");
        ++steps_;
        for (std::size_t i = 0; i < segments_.size(); ++i) segments_[i].grad = static_cast<const T *>(grads[i]);
        if (optimizer_->stat_phases() > 0) threads_.begin_step(*optimizer_, segments_, steps_, stats);
    }

    void continue_step(int phase, double *stats) override {
        threads_.continue_step(phase, *optimizer_, segments_, steps_, stats);
    }

    void apply(const double *stats) override { threads_.apply(*optimizer_, segments_, steps_, stats); }

    void set_lr(double lr) override { optimizer_->set_lr(lr); }
    std::size_t state_bytes() const noexcept override { return state_bytes_; }
    int state_slots() const noexcept override { return optimizer_->state_slots(); }
    // Low-bit slots cross as their values (lowbit::decode_slice / encode_slice): checkpoints and
    // state synchronization hold the same numbers whatever the precision.
    void read_state(int span, int slot, void *host) override {
        const auto &seg = segment(span, slot);
        if (seg.lowbit[slot].codes)
            return lowbit::decode_slice(seg.lowbit[slot], precision_, slot == 0, seg.offset, seg.count,
                                        static_cast<T *>(host));
        std::memcpy(host, seg.state[slot], seg.count * sizeof(T));
    }
    void write_state(int span, int slot, const void *host, const double *maxima) override {
        const auto &seg = segment(span, slot);
        if (seg.lowbit[slot].codes) {
            // A block other ranks hold parts of takes the maximum over every part.
            auto top = [&](std::size_t shared) {
                if (shared == Segment<T>::npos) return -1.0;
                require(maxima != nullptr, ErrorCode::internal, "low-bit state of a split block written without maxima");
                return maxima[shared_stat(seg, shared, slot)];
            };
            return lowbit::encode_slice(seg.lowbit[slot], precision_, slot == 0, seg.offset, seg.count,
                                        static_cast<const T *>(host), top(seg.shared_first), top(seg.shared_last));
        }
        std::memcpy(seg.state[slot], host, seg.count * sizeof(T));
    }
    void shared_maxima(int span, int slot, const void *host, double *maxima) const override {
        const auto &seg = segment(span, slot);
        if (!seg.lowbit[slot].codes) return;
        const auto *values = static_cast<const T *>(host);
        if (seg.shared_first != Segment<T>::npos) {
            double &m = maxima[shared_stat(seg, seg.shared_first, slot)];
            m = std::max(m, lowbit::head_top(precision_, seg.offset, seg.count, values));
        }
        if (seg.shared_last != Segment<T>::npos) {
            double &m = maxima[shared_stat(seg, seg.shared_last, slot)];
            m = std::max(m, lowbit::tail_top(precision_, seg.offset, seg.count, values));
        }
    }
    void set_step_count(std::int64_t steps) override {
        require(steps >= 0, ErrorCode::invalid_argument, "step count must be >= 0");
        steps_ = steps;
    }

  private:
    // Where shared block `shared`'s maximum of slot `slot` is in the statistics (the rules' order).
    std::size_t shared_stat(const Segment<T> &seg, std::size_t shared, int slot) const {
        return seg.stats[0] + shared * std::size_t(optimizer_->state_slots()) + std::size_t(slot);
    }
    const Segment<T> &segment(int span, int slot) const {
        require(slot >= 0 && slot < state_slots(), ErrorCode::invalid_argument, "no state slot " + std::to_string(slot));
        return segments_.at(std::size_t(span));
    }

    std::unique_ptr<Optimizer> optimizer_;
    StatePrecision precision_;
    ParallelUpdate &threads_;
    std::vector<AlignedBuffer> state_;
    std::vector<Segment<T>> segments_;
    std::size_t state_bytes_ = 0;
    std::int64_t steps_ = 0;
};

class HostSpace final : public Space {
  public:
    explicit HostSpace(int update_threads) : threads_(update_threads) {}
    const char *name() const noexcept override { return "host"; }
    bool host_accessible() const noexcept override { return true; }
    int device() const noexcept override { return -1; }
    void check_supported(DType dtype, const OptimizerOptions &, bool) const override {
        require(dtype == DType::f32 || dtype == DType::f64, ErrorCode::invalid_argument,
                std::string("host memory keeps f32 or f64 parameters, got ") + dtype_name(dtype));
    }
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
    void copy(void *dst, const void *src, std::size_t bytes) override {
        if (bytes && dst != src) std::memcpy(dst, src, bytes);
    }
    void copy_from_host(void *dst, const void *host, std::size_t bytes) override {
        if (bytes && dst != host) std::memcpy(dst, host, bytes);
    }
    void copy_to_host(void *host, const void *src, std::size_t bytes) override {
        if (bytes && host != src) std::memcpy(host, src, bytes);
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
        return make_host_updater(params, dtype, options, threads_);
    }
    void synchronize() override {}

  private:
    ParallelUpdate threads_; // shared by every bucket's updater: one pool per optimizer
};

} // namespace

std::unique_ptr<SpanUpdater> make_host_updater(const std::vector<Span> &params, DType dtype,
                                               const OptimizerOptions &options, ParallelUpdate &threads) {
    require(dtype == DType::f32 || dtype == DType::f64, ErrorCode::invalid_argument,
            std::string("host memory keeps f32 or f64 parameters, got ") + dtype_name(dtype));
    if (dtype == DType::f32) return std::make_unique<HostUpdater<float>>(params, options, threads);
    return std::make_unique<HostUpdater<double>>(params, options, threads);
}

std::unique_ptr<Space> make_host_space(int update_threads) { return std::make_unique<HostSpace>(update_threads); }

} // namespace shardopt::engine

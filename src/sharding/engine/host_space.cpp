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

// The reference rule over the spans: per span, one state array per slot its tensor has (or, for a
// slot the rule keeps low-bit, its codes and block scales) and the tensor's own state (Adafactor's
// factored variances), which this rank keeps whole. The update of one bucket is spread over the
// space's threads; ParallelUpdate keeps it bitwise the same for any thread count, and runs the
// rules' statistics phases on the calling thread in span order.
//
// State crosses to the host (checkpoints, synchronization) slot by slot, as values over the
// span's elements: low-bit slots decoded, and a tensor's own state as the first values of slot 0
// (which such tensors do not otherwise have), so the files hold the same numbers whatever the
// precision, strategy or world size.
template <typename T> class HostUpdater final : public SpanUpdater {
  public:
    HostUpdater(const std::vector<Span> &params, const OptimizerOptions &options, ParallelUpdate &threads)
        : optimizer_(Optimizer::create(options)), precision_(options.state_precision), threads_(threads) {
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
            for (int k = 0; k < optimizer_->state_slots(span.shape); ++k) {
                if (optimizer_->quantized(k, span.shape)) { // codes and scales, all zero: state 0
                    const std::size_t codes = lowbit::code_bytes(precision_, span.offset, span.count);
                    const std::size_t blocks = lowbit::blocks_touched(precision_, span.offset, span.count);
                    unsigned char *at = take(codes + blocks * sizeof(float));
                    seg.lowbit[k].scales = reinterpret_cast<float *>(at);
                    seg.lowbit[k].codes = at + blocks * sizeof(float);
                } else {
                    auto *s = reinterpret_cast<T *>(take(span.count * sizeof(T)));
                    const T init = T(optimizer_->state_initial_value(k));
                    for (std::size_t e = 0; e < span.count; ++e) s[e] = init;
                    seg.state[k] = s;
                }
            }
            if (const std::size_t n = optimizer_->tensor_state(span.shape); n > 0 && span.count > 0)
                seg.tensor_state = reinterpret_cast<T *>(take(n * sizeof(T)));
            if (optimizer_->transforms_matrices() && span.shape.matrix() && span.count > 0) { // scratch, not state
                matrices_.emplace_back(span.count * sizeof(T));
                seg.matrix = reinterpret_cast<T *>(matrices_.back().data());
            }
            segments_.push_back(seg);
            restore_.push_back(span.restore);
        }
    }

    void begin_step(const std::vector<const void *> &grads, double *stats) override {
        require(grads.size() == segments_.size(), ErrorCode::invalid_argument,
                "updater: " + std::to_string(grads.size()) + " gradients for " + std::to_string(segments_.size()) +
                    " spans");
        ++steps_;
        for (std::size_t i = 0; i < segments_.size(); ++i) segments_[i].grad = static_cast<const T *>(grads[i]);
        if (optimizer_->has_first_phase()) threads_.begin_step(*optimizer_, segments_, steps_, stats);
    }

    void *matrix_part(int span) override { return segments_.at(std::size_t(span)).matrix; }

    void continue_step(int phase, double *stats) override {
        threads_.continue_step(phase, *optimizer_, segments_, steps_, stats);
    }

    void apply(const double *stats) override { threads_.apply(*optimizer_, segments_, steps_, stats); }

    void set_lr(double lr) override { optimizer_->set_lr(lr); }
    std::size_t state_bytes() const noexcept override { return state_bytes_; }
    int state_slots() const noexcept override { return optimizer_->state_slots(); }

    void read_state(int span, int slot, void *host) override {
        const auto &seg = segment(span, slot);
        T *out = static_cast<T *>(host);
        if (seg.state[slot]) return (void)std::memcpy(out, seg.state[slot], seg.count * sizeof(T));
        if (seg.lowbit[slot].codes)
            return lowbit::decode_slice(seg.lowbit[slot], precision_, slot == 0, seg.offset, seg.count, out);
        std::fill(out, out + seg.count, T(0));
        if (slot == 0 && seg.tensor_state) {
            const std::size_t n = tensor_state_values(seg);
            for (std::size_t i = 0; i < seg.count && seg.offset + i < n; ++i) out[i] = seg.tensor_state[seg.offset + i];
        }
    }

    void write_state(int span, int slot, const void *host, const double *restored) override {
        const auto &seg = segment(span, slot);
        const T *in = static_cast<const T *>(host);
        if (seg.state[slot]) return (void)std::memcpy(seg.state[slot], in, seg.count * sizeof(T));
        const std::size_t base = restore_[std::size_t(span)];
        if (seg.lowbit[slot].codes) {
            // A block other ranks hold parts of takes the maximum over every part.
            auto top = [&](std::size_t shared) {
                if (shared == Segment<T>::npos) return -1.0;
                require(restored != nullptr, ErrorCode::internal, "low-bit state of a split block written alone");
                return restored[base + shared * std::size_t(state_slots()) + std::size_t(slot)];
            };
            return lowbit::encode_slice(seg.lowbit[slot], precision_, slot == 0, seg.offset, seg.count, in,
                                        top(seg.shared_first), top(seg.shared_last));
        }
        if (slot == 0 && seg.tensor_state) { // from the ranks holding the tensor's first values
            const std::size_t n = tensor_state_values(seg);
            const std::size_t at = base + seg.shape.shared_blocks * std::size_t(state_slots());
            for (std::size_t e = 0; e < n; ++e) {
                require(restored != nullptr || (e >= seg.offset && e < seg.offset + seg.count), ErrorCode::internal,
                        "per-tensor state restored from a part of its tensor");
                seg.tensor_state[e] = restored ? T(restored[at + e]) : in[e - seg.offset];
            }
        }
    }

    void restore_parts(int span, int slot, const void *host, double *parts) const override {
        const auto &seg = segment(span, slot);
        const T *in = static_cast<const T *>(host);
        const std::size_t base = restore_[std::size_t(span)];
        auto add = [&](std::size_t at, double v) { parts[at] = std::max(parts[at], v); };
        if (seg.lowbit[slot].codes) {
            const std::size_t slots = std::size_t(state_slots());
            if (seg.shared_first != Segment<T>::npos)
                add(base + seg.shared_first * slots + std::size_t(slot),
                    lowbit::head_top(precision_, seg.offset, seg.count, in));
            if (seg.shared_last != Segment<T>::npos)
                add(base + seg.shared_last * slots + std::size_t(slot),
                    lowbit::tail_top(precision_, seg.offset, seg.count, in));
        }
        if (slot == 0 && seg.tensor_state && !seg.state[0]) { // variances, >= 0: max is their union
            const std::size_t n = tensor_state_values(seg);
            const std::size_t at = base + seg.shape.shared_blocks * std::size_t(state_slots());
            for (std::size_t i = 0; i < seg.count && seg.offset + i < n; ++i) add(at + seg.offset + i, double(in[i]));
        }
    }

    void set_step_count(std::int64_t steps) override {
        require(steps >= 0, ErrorCode::invalid_argument, "step count must be >= 0");
        steps_ = steps;
    }

  private:
    // Zero-filled state memory of `bytes`, counted.
    unsigned char *take(std::size_t bytes) {
        state_.emplace_back(bytes);
        std::memset(state_.back().data(), 0, bytes);
        state_bytes_ += bytes;
        return state_.back().data();
    }
    // The tensor's own state values, which must fit in its slot 0 to cross to the host.
    std::size_t tensor_state_values(const Segment<T> &seg) const {
        const std::size_t n = optimizer_->tensor_state(seg.shape);
        require(n <= seg.shape.count, ErrorCode::unsupported,
                std::string(optimizer_kind_name(optimizer_->kind())) + ": the state of tensor " +
                    std::to_string(seg.tensor) + " (a " + std::to_string(seg.shape.rows) + " x " +
                    std::to_string(seg.shape.cols()) + " matrix: " + std::to_string(n) +
                    " values) does not fit its checkpoint slot of " + std::to_string(seg.shape.count) +
                    " (a matrix with one row or column: add it as a vector)");
        return n;
    }
    const Segment<T> &segment(int span, int slot) const {
        require(slot >= 0 && slot < state_slots(), ErrorCode::invalid_argument, "no state slot " + std::to_string(slot));
        return segments_.at(std::size_t(span));
    }

    std::unique_ptr<Optimizer> optimizer_;
    StatePrecision precision_;
    ParallelUpdate &threads_;
    std::vector<AlignedBuffer> state_;
    std::vector<AlignedBuffer> matrices_; // each span's part of the matrix a step transforms
    std::vector<Segment<T>> segments_;
    std::vector<std::size_t> restore_; // per span: Span::restore
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

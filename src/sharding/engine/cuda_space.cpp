// The CUDA Space (cuda_space.hpp): cudaMalloc'd memory on the communicator's GPU, every
// pass enqueued on the caller's compute stream, collectives ordered after it by an event.
//
// Every host wait is a polled event bounded by the communicator's timeout (gpu::detail::
// wait_event), never cudaStreamSynchronize: a hung device or a collective stuck behind a lost
// peer ends in Error(timeout) instead of a hang. Every CUDA call runs under a DeviceGuard, so
// the caller's current device is left as it was.
#include "cuda_space.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cuda/event_wait.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/cuda_device.hpp"
#include "cuda/cuda_event.hpp"
#include "cuda/device_buffer.hpp"
#include "../../optim/cuda/sliced_optimizer.hpp"
#include "../../optim/lowbit.hpp"
#include "shardopt/error.hpp"
#include "shardopt/gpu_comm.hpp"
#include "comm/gpu/host_buffer_comm.hpp"
#include "cuda_offload_lanes.hpp"
#include "space_kernels.hpp"

namespace shardopt::engine {
namespace {

using cuda::detail::check;
using cuda::detail::DeviceBuffer;
using cuda::detail::DeviceGuard;
using cuda::detail::Event;

// Page-locked host memory for the small device-to-host reads (partials, the allreduced
// scalar): only pinned memory makes cudaMemcpyAsync truly asynchronous, so the bounded event
// wait is what waits. Grows, never shrinks; contents are not kept when it grows.
class PinnedScratch {
  public:
    PinnedScratch() = default;
    ~PinnedScratch() { release(); }
    PinnedScratch(const PinnedScratch &) = delete;
    PinnedScratch &operator=(const PinnedScratch &) = delete;

    double *doubles(std::size_t count) {
        const std::size_t bytes = count * sizeof(double);
        if (bytes > bytes_) {
            release();
            const std::size_t want = std::max(bytes, std::size_t(4096));
            check(cudaHostAlloc(&ptr_, want, cudaHostAllocPortable),
                  ("cudaHostAlloc of " + std::to_string(want) + " pinned bytes for the CUDA space").c_str());
            bytes_ = want;
        }
        return static_cast<double *>(ptr_);
    }
    void release() noexcept {
        if (ptr_ != nullptr && cudaFreeHost(ptr_) != cudaSuccess) (void)cudaGetLastError();
        ptr_ = nullptr;
        bytes_ = 0;
    }

  private:
    void *ptr_ = nullptr;
    std::size_t bytes_ = 0;
};

// A space allocation: freed on its own device, whichever device the caller has current.
class CudaBuffer final : public SpaceBuffer {
  public:
    CudaBuffer(int device, DeviceBuffer buffer) : device_(device), buffer_(std::move(buffer)) {}
    ~CudaBuffer() override {
        try {
            DeviceGuard guard(device_);
            buffer_ = DeviceBuffer();
        } catch (...) { // the device is gone (process teardown): the DeviceBuffer still frees what it can
        }
    }
    unsigned char *data() const noexcept override { return buffer_.as<unsigned char>(); }
    std::size_t bytes() const noexcept override { return buffer_.bytes(); }

  private:
    int device_;
    DeviceBuffer buffer_;
};

// The CUDA optimizer over the non-empty spans (it has nothing to do for an empty one, and needs
// at least one tensor): span i is tensor tensor_of_[i], or -1. With every span empty there is no
// optimizer and step() does nothing. The update rule is the plain one of OptimizerOptions:
// clipping, the finite check and loss scaling are the engine's business, so they are off here.
//
// Low-bit state: each span is a slice of its tensor (TensorSlice: where it lies, the tensor's size,
// which of its end blocks other ranks share), laid out and quantized as the host updater does. A
// block that other ranks hold parts of is scaled by the maximum over every part: begin_step runs
// the kernels' maxima pass and adds this rank's maxima into the step's statistics (the rule's
// phase 0, as the CPU rule's begin_step), the engine combines them across the group, and apply
// hands the combined maxima to the update. Checkpoints cross as decoded values; restoring a split
// block takes its other parts' largest |value| (restore_parts / write_state), as the host does.
class CudaUpdater final : public SpanUpdater {
  public:
    CudaUpdater(const std::vector<Span> &params, DType dtype, const OptimizerOptions &options, int device,
                cudaStream_t stream)
        : stream_(stream), rule_(Optimizer::create(options)), precision_(options.state_precision) {
        slots_ = rule_->state_slots(); // validates the options, optimizer or not
        require(dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16, ErrorCode::invalid_argument,
                std::string("parameter dtype must be f32, bf16 or f16, got ") + dtype_name(dtype));
        std::vector<cuda::DeviceTensor> tensors;
        std::vector<cuda::detail::TensorSlice> slices;
        for (const Span &span : params) {
            spans_.push_back(span);
            tensor_of_.push_back(span.count == 0 ? -1 : int(tensors.size()));
            if (span.count == 0) continue;
            tensors.push_back(cuda::DeviceTensor{span.data, span.count});
            cuda::detail::TensorSlice slice;
            slice.offset = span.offset;
            slice.tensor_count = std::max(span.shape.count, span.offset + span.count);
            slice.shared_first = span.shared_first != Span::npos;
            slice.shared_last = span.shared_last != Span::npos;
            slices.push_back(slice);
            // Bytes as the host updater counts them: codes and scales of a quantized slot, else fp32.
            for (int k = 0; k < slots_; ++k)
                state_bytes_ += quantized(span, k) ? lowbit::code_bytes(precision_, span.offset, span.count) +
                                                         lowbit::blocks_touched(precision_, span.offset, span.count) *
                                                             sizeof(float)
                                                   : span.count * sizeof(float);
            if (dtype != DType::f32) state_bytes_ += span.count * sizeof(float); // master weights
        }
        if (tensors.empty()) return;
        cuda::DeviceOptimizerOptions o;
        o.optimizer = options;
        o.dtype = dtype;
        o.max_grad_norm = 0.0;
        o.skip_nonfinite = false;
        o.loss_scaling.mode = cuda::LossScaling::none;
        o.device = device;
        optimizer_ = cuda::detail::create_sliced_optimizer(tensors, slices, o, stream);
        grads_.reserve(tensors.size());
        if (optimizer_->shares_blocks()) tops_.assign(tensors.size() * cuda::detail::kTopsPerTensor, 0.0f);
    }

    // The kernels compute LAMB's per-tensor norms themselves: the space only runs it on whole
    // tensors (check_supported). Low-bit blocks shared with other ranks: this rank's part of
    // their new maxima into the statistics (Span::stats[0] + shared block * slots + slot, max).
    void begin_step(const std::vector<const void *> &grads, double *stats) override {
        require(grads.size() == spans_.size(), ErrorCode::invalid_argument,
                "step got " + std::to_string(grads.size()) + " gradients for " + std::to_string(spans_.size()) +
                    " spans");
        grads_.clear();
        for (std::size_t i = 0; i < grads.size(); ++i)
            if (tensor_of_[i] >= 0) grads_.push_back(grads[i]);
        if (!optimizer_ || tops_.empty()) return;
        optimizer_->begin_step(grads_.data(), grads_.size(), stream_, tops_.data());
        require(stats != nullptr, ErrorCode::internal, "low-bit state with shared blocks needs statistics");
        each_shared_top([&](std::size_t at, float &top) { stats[at] = std::max(stats[at], double(top)); });
    }

    void continue_step(int, double *) override {}
    void apply(const double *stats) override {
        if (!optimizer_) return;
        if (tops_.empty()) return optimizer_->step(grads_.data(), grads_.size(), stream_);
        require(stats != nullptr, ErrorCode::internal, "low-bit state with shared blocks needs statistics");
        each_shared_top([&](std::size_t at, float &top) { top = float(stats[at]); }); // a float's maximum: exact
        optimizer_->finish_step(tops_.data(), stream_);
    }

    void set_lr(double lr) override {
        if (optimizer_) optimizer_->set_lr(lr);
        else require(std::isfinite(lr) && lr >= 0.0, ErrorCode::invalid_argument, "lr must be >= 0, got " + std::to_string(lr));
    }

    std::size_t state_bytes() const noexcept override { return state_bytes_; }
    int state_slots() const noexcept override { return slots_; }

    void read_state(int span, int slot, void *host) override {
        const int tensor = tensor_of(span, slot);
        if (tensor >= 0) optimizer_->read_state(tensor, slot, static_cast<float *>(host));
    }

    // A split low-bit block takes the largest |value| of its other parts (`restored`, combined
    // across the group from every rank's restore_parts), as HostUpdater::write_state.
    void write_state(int span, int slot, const void *host, const double *restored) override {
        const int tensor = tensor_of(span, slot);
        if (tensor < 0) return;
        const Span &s = spans_[std::size_t(span)];
        const auto *in = static_cast<const float *>(host);
        if (!quantized(s, slot)) return optimizer_->write_state(tensor, slot, in);
        auto top = [&](std::size_t shared) {
            if (shared == Span::npos) return -1.0;
            require(restored != nullptr, ErrorCode::internal, "low-bit state of a split block written alone");
            return restored[s.restore + shared * std::size_t(slots_) + std::size_t(slot)];
        };
        optimizer_->write_state(tensor, slot, in, top(s.shared_first), top(s.shared_last));
    }

    void restore_parts(int span, int slot, const void *host, double *parts) const override {
        const Span &s = spans_.at(std::size_t(span));
        if (s.count == 0 || !quantized(s, slot)) return;
        const auto *in = static_cast<const float *>(host);
        auto add = [&](std::size_t shared, double v) {
            double &at = parts[s.restore + shared * std::size_t(slots_) + std::size_t(slot)];
            at = std::max(at, v);
        };
        if (s.shared_first != Span::npos) add(s.shared_first, lowbit::head_top(precision_, s.offset, s.count, in));
        if (s.shared_last != Span::npos) add(s.shared_last, lowbit::tail_top(precision_, s.offset, s.count, in));
    }

    void set_step_count(std::int64_t steps) override {
        require(steps >= 0, ErrorCode::invalid_argument, "step count must be >= 0");
        if (optimizer_) optimizer_->set_step_count(steps);
    }

  private:
    // The optimizer's tensor of span `span` (-1 for an empty span), after range checks.
    int tensor_of(int span, int slot) const {
        require(span >= 0 && std::size_t(span) < spans_.size(), ErrorCode::invalid_argument,
                "span " + std::to_string(span) + " out of range [0, " + std::to_string(spans_.size()) + ")");
        require(slot >= 0 && slot < slots_, ErrorCode::invalid_argument,
                "state slot " + std::to_string(slot) + " out of range [0, " + std::to_string(slots_) + ")");
        return tensor_of_[std::size_t(span)];
    }
    bool quantized(const Span &span, int slot) const { return rule_->quantized(slot, span.shape); }

    // f(where in the statistics, the optimizer's maximum) for each shared end block of each
    // quantized span and each slot (SlicedOptimizer's tops layout).
    template <typename F> void each_shared_top(F &&f) {
        const std::size_t slots = std::size_t(slots_);
        for (std::size_t i = 0; i < spans_.size(); ++i) {
            const Span &s = spans_[i];
            if (tensor_of_[i] < 0 || !quantized(s, 0)) continue;
            float *tops = tops_.data() + std::size_t(tensor_of_[i]) * cuda::detail::kTopsPerTensor;
            for (std::size_t k = 0; k < slots; ++k) {
                if (s.shared_first != Span::npos) f(s.stats[0] + s.shared_first * slots + k, tops[k]);
                if (s.shared_last != Span::npos) f(s.stats[0] + s.shared_last * slots + k, tops[2 + k]);
            }
        }
    }

    cudaStream_t stream_;
    std::unique_ptr<Optimizer> rule_; // which slots of which tensors are quantized
    StatePrecision precision_;
    std::vector<Span> spans_;
    std::vector<int> tensor_of_;
    std::unique_ptr<cuda::detail::SlicedOptimizer> optimizer_;
    std::vector<const void *> grads_; // step()'s gradients of the non-empty spans (kept: no allocation per step)
    std::vector<float> tops_;         // the shared blocks' maxima (SlicedOptimizer::begin_step), or empty
    int slots_ = 0;
    std::size_t state_bytes_ = 0;
};

class CudaSpace final : public Space {
  public:
    CudaSpace(const Communicator &comm, cudaStream_t compute, int update_threads)
        : device_(gpu::device_of(comm)), compute_(compute), comm_(comm.weak_from_this()), timeout_(comm.timeout()),
          update_threads_(update_threads) {
        DeviceGuard guard(device_);
        order_.create();
        done_.create();
        scalar_ = DeviceBuffer(sizeof(double), "the allreduce scalar");
        detail::preload_space_kernels();
    }

    ~CudaSpace() override {
        try {
            lanes_.reset(); // waits for its copies first
            DeviceGuard guard(device_); // events and memory are released on their own device
            order_.destroy();
            done_.destroy();
            scalar_ = DeviceBuffer();
            partials_ = DeviceBuffer();
            pinned_.release();
        } catch (...) { // the device is gone (process teardown): the members' destructors still run
        }
    }

    const char *name() const noexcept override { return "cuda"; }
    bool host_accessible() const noexcept override { return false; }
    int device() const noexcept override { return device_; }

    void check_supported(DType dtype, const OptimizerOptions &optimizer, bool tensors_split) const override {
        require(dtype == DType::f32, ErrorCode::unsupported,
                std::string("cuda memory keeps f32 parameters (the space's kernels have no ") + dtype_name(dtype) +
                    " passes); the layout's dtype is " + dtype_name(dtype) + ": use host memory for it");
        // LAMB's per-tensor norms would need a reduction across ranks between its kernels.
        require(!(optimizer.kind == OptimizerKind::lamb && tensors_split), ErrorCode::unsupported,
                "LAMB in cuda memory needs whole tensors on each rank: use ddp or local_sgd (or host memory, which "
                "reduces LAMB's per-tensor norms across shards)");
    }

    SpaceBufferPtr allocate(std::size_t bytes, const char *what) override {
        DeviceGuard guard(device_);
        DeviceBuffer buffer(bytes, what);
        // Enqueued on the compute stream: later passes see zeros; collectives are ordered after it
        // by before_collective.
        if (bytes > 0)
            check(cudaMemsetAsync(buffer.get(), 0, bytes, compute_),
                  (std::string("cudaMemsetAsync zeroing ") + what).c_str());
        return std::make_unique<CudaBuffer>(device_, std::move(buffer));
    }

    void zero(void *data, std::size_t bytes) override {
        if (bytes == 0) return;
        DeviceGuard guard(device_);
        check(cudaMemsetAsync(data, 0, bytes, compute_), "cudaMemsetAsync on the compute stream");
    }

    void add_into(void *dst, const void *src, std::size_t count, DType dtype) override {
        DeviceGuard guard(device_);
        detail::launch_add_into(dst, src, count, dtype, compute_);
    }

    void scale(void *data, std::size_t count, DType dtype, double factor) override {
        DeviceGuard guard(device_);
        detail::launch_scale(data, count, dtype, factor, compute_);
    }

    // One partial per chunk of kSumsqChunk elements, summed here in chunk order: the result
    // depends only on the spans' lengths and values, never on timing.
    double sum_of_squares(const std::vector<Span> &spans, DType dtype) override {
        detail::require_float(dtype);
        std::size_t chunks = 0;
        for (const Span &span : spans) chunks += (span.count + detail::kSumsqChunk - 1) / detail::kSumsqChunk;
        if (chunks == 0) return 0.0;
        DeviceGuard guard(device_);
        if (partials_.bytes() < chunks * sizeof(double)) {
            partials_ = DeviceBuffer(); // free before allocating: the device may have room for one only
            partials_ = DeviceBuffer(chunks * sizeof(double), "sum-of-squares partials");
        }
        double *partials = partials_.as<double>();
        // Pinned before the launches: growing it (cudaFreeHost, cudaHostAlloc) may wait for the device.
        double *host = pinned_.doubles(chunks);

        const std::size_t elem = dtype_size(dtype);
        detail::SumsqPatch patch;
        std::size_t done = 0; // partials of the patches launched so far
        for (const Span &span : spans) {
            for (std::size_t offset = 0; offset < span.count; offset += detail::kSumsqChunk) {
                patch.data[patch.count] = span.data + offset * elem;
                patch.elements[patch.count] = int32_t(std::min(detail::kSumsqChunk, span.count - offset));
                if (++patch.count < detail::kSumsqPatchChunks) continue;
                detail::launch_sumsq_partials(patch, partials + done, dtype, compute_);
                done += std::size_t(patch.count);
                patch.count = 0;
            }
        }
        if (patch.count > 0) detail::launch_sumsq_partials(patch, partials + done, dtype, compute_);

        check(cudaMemcpyAsync(host, partials, chunks * sizeof(double), cudaMemcpyDeviceToHost, compute_),
              "cudaMemcpyAsync of the sum-of-squares partials to the host");
        wait_for(compute_, "the sum-of-squares partials", timeout());
        double sum = 0.0;
        for (std::size_t c = 0; c < chunks; ++c) sum += host[c];
        return sum;
    }

    void copy(void *dst, const void *src, std::size_t bytes) override {
        if (bytes == 0 || dst == src) return;
        DeviceGuard guard(device_);
        check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, compute_),
              "cudaMemcpyAsync device to device on the compute stream");
    }

    void copy_from_host(void *dst, const void *host, std::size_t bytes) override {
        copy_across(dst, host, bytes, cudaMemcpyHostToDevice, "from the host");
    }

    void copy_to_host(void *host, const void *src, std::size_t bytes) override {
        copy_across(host, src, bytes, cudaMemcpyDeviceToHost, "to the host");
    }

    // The communicator's stream waits, on the device, for everything issued on the compute
    // stream so far; the host does not wait. (When set_stream made them one stream, the wait is
    // already satisfied.)
    void before_collective(Communicator &comm) override {
        DeviceGuard guard(device_);
        check(cudaEventRecord(order_.get(), compute_), "cudaEventRecord on the compute stream");
        check(cudaStreamWaitEvent(gpu::stream_of(comm), order_.get(), 0),
              "cudaStreamWaitEvent: the communicator's stream after the compute stream");
    }

    // Through device memory (NCCL reduces device buffers only). The value travels in from a
    // pinned slot on the compute stream, so before_collective orders the collective after it;
    // the blocking allreduce returns once it completed on the communicator's stream, and the
    // result is read back on that stream.
    double allreduce_scalar(Communicator &comm, double value, ReduceOp op) override {
        DeviceGuard guard(device_);
        double *slots = pinned_.doubles(2); // [0] in, [1] out; the last call's copies were waited for
        slots[0] = value;
        check(cudaMemcpyAsync(scalar_.get(), &slots[0], sizeof(double), cudaMemcpyHostToDevice, compute_),
              "cudaMemcpyAsync of the allreduce scalar to the device");
        before_collective(comm);
        comm.allreduce(scalar_.get(), scalar_.get(), 1, DType::f64, op);
        const cudaStream_t comm_stream = gpu::stream_of(comm);
        check(cudaMemcpyAsync(&slots[1], scalar_.get(), sizeof(double), cudaMemcpyDeviceToHost, comm_stream),
              "cudaMemcpyAsync of the allreduced scalar to the host");
        wait_for(comm_stream, "the allreduced scalar", comm.timeout());
        return slots[1];
    }

    std::unique_ptr<SpanUpdater> make_updater(const std::vector<Span> &params, DType dtype,
                                              const OptimizerOptions &options) override {
        // DeviceOptimizer::create waits for the compute stream (bounded by SHARDOPT_TIMEOUT_MS);
        // draining it here first, within the communicator's timeout, leaves that wait only the
        // optimizer's own set-up.
        DeviceGuard guard(device_);
        wait_for(compute_, "the compute stream's work before creating an optimizer", timeout());
        return std::make_unique<CudaUpdater>(params, dtype, options, device_, compute_);
    }

    void synchronize() override {
        DeviceGuard guard(device_);
        wait_for(compute_, "every pass issued on the compute stream", timeout());
    }

    CommunicatorPtr host_access(CommunicatorPtr comm) override {
        require(comm != nullptr, ErrorCode::invalid_argument, "host_access: communicator is null");
        return std::make_shared<gpu::detail::HostBufferComm>(std::move(comm));
    }

    // Made on first use: an optimizer without ZeRO-Offload creates no copy streams.
    OffloadLanes *offload_lanes() override {
        if (!lanes_)
            lanes_ = std::make_unique<CudaOffloadLanes>(device_, compute_, [this] { return timeout(); }, update_threads_);
        return lanes_.get();
    }

  private:
    // The communicator's current timeout (set_timeout may change it after the space was made);
    // the one it had then, once the communicator is gone.
    Communicator::Duration timeout() const {
        if (const std::shared_ptr<const Communicator> comm = comm_.lock()) return comm->timeout();
        return timeout_;
    }

    // The host buffers are pageable, and a pageable cudaMemcpyAsync may wait for the stream
    // inside the call, unbounded. Waiting for the stream first (bounded) leaves that call only
    // the copy itself to wait for.
    void copy_across(void *dst, const void *src, std::size_t bytes, cudaMemcpyKind kind, const char *direction) {
        if (bytes == 0) return;
        DeviceGuard guard(device_);
        const Communicator::Duration limit = timeout();
        const std::string copy_name = "a copy of " + std::to_string(bytes) + " bytes " + direction;
        wait_for(compute_, ("the compute stream's work before " + copy_name).c_str(), limit);
        check(cudaMemcpyAsync(dst, src, bytes, kind, compute_), ("cudaMemcpyAsync: " + copy_name).c_str());
        wait_for(compute_, copy_name.c_str(), limit);
    }

    // Waits (bounded) until everything issued on `stream` so far has completed. Called under
    // the DeviceGuard: the event is recorded on a stream of the space's device.
    void wait_for(cudaStream_t stream, const char *what, Communicator::Duration limit) {
        check(cudaEventRecord(done_.get(), stream), (std::string("cudaEventRecord before waiting for ") + what).c_str());
        cuda::detail::wait_event(done_.get(), cuda::detail::Clock::now() + limit, {}, [&] {
            return "cuda space (device " + std::to_string(device_) + "): waiting for " + what +
                   " took longer than the timeout of " + std::to_string(limit.count()) + " ms";
        });
    }

    int device_;
    cudaStream_t compute_;
    std::weak_ptr<const Communicator> comm_; // for its timeout only: the space does not keep it alive
    Communicator::Duration timeout_;
    Event order_; // before_collective's: compute stream -> communicator's stream
    Event done_;  // wait_for's
    DeviceBuffer scalar_;   // allreduce_scalar's device double
    DeviceBuffer partials_; // sum_of_squares' partials, grown to the largest call
    PinnedScratch pinned_;  // host side of the partials and of the allreduce scalar
    int update_threads_;    // the CPU update's, with ZeRO-Offload
    std::unique_ptr<CudaOffloadLanes> lanes_;
};

} // namespace

std::unique_ptr<Space> make_cuda_space(const Communicator &comm, cuda::Stream compute_stream, int update_threads) {
    return std::make_unique<CudaSpace>(comm, compute_stream, update_threads);
}

} // namespace shardopt::engine

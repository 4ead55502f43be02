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

// DeviceOptimizer over the non-empty spans (it has nothing to do for an empty one, and needs at
// least one tensor): span i is tensor tensor_of_[i], or -1. With every span empty there is no
// optimizer and step() does nothing. The update rule is the plain one of OptimizerOptions:
// clipping, the finite check and loss scaling are the engine's business, so they are off here.
class CudaUpdater final : public SpanUpdater {
  public:
    CudaUpdater(const std::vector<Span> &params, DType dtype, const OptimizerOptions &options, int device,
                cudaStream_t stream)
        : stream_(stream) {
        slots_ = Optimizer::create(options)->state_slots(); // validates the options, optimizer or not
        require(dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16, ErrorCode::invalid_argument,
                std::string("parameter dtype must be f32, bf16 or f16, got ") + dtype_name(dtype));
        std::vector<cuda::DeviceTensor> tensors;
        std::size_t elements = 0;
        for (const Span &span : params) {
            counts_.push_back(span.count);
            tensor_of_.push_back(span.count == 0 ? -1 : int(tensors.size()));
            if (span.count > 0) tensors.push_back(cuda::DeviceTensor{span.data, span.count});
            elements += span.count;
        }
        // fp32 state per slot, and fp32 master weights when the parameters are bf16/f16.
        state_bytes_ = elements * sizeof(float) * std::size_t(slots_ + (dtype == DType::f32 ? 0 : 1));
        if (tensors.empty()) return;
        cuda::DeviceOptimizerOptions o;
        o.optimizer = options;
        o.dtype = dtype;
        o.max_grad_norm = 0.0;
        o.skip_nonfinite = false;
        o.loss_scaling.mode = cuda::LossScaling::none;
        o.device = device;
        optimizer_ = cuda::DeviceOptimizer::create(tensors, o, stream);
        grads_.reserve(tensors.size());
    }

    // The kernels compute LAMB's per-tensor norms themselves: the space only runs it on whole
    // tensors (check_supported), so there is nothing to combine across ranks, and no other phase.
    void begin_step(const std::vector<const void *> &grads, double *) override {
        require(grads.size() == counts_.size(), ErrorCode::invalid_argument,
                "step got " + std::to_string(grads.size()) + " gradients for " + std::to_string(counts_.size()) +
                    " spans");
        grads_.clear();
        for (std::size_t i = 0; i < grads.size(); ++i)
            if (tensor_of_[i] >= 0) grads_.push_back(grads[i]);
    }

    void continue_step(int, double *) override {}
    void apply(const double *) override {
        if (optimizer_) optimizer_->step(grads_.data(), grads_.size(), stream_);
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

    void write_state(int span, int slot, const void *host, const double *) override {
        const int tensor = tensor_of(span, slot);
        if (tensor >= 0) optimizer_->write_state(tensor, slot, static_cast<const float *>(host));
    }

    void set_step_count(std::int64_t steps) override {
        require(steps >= 0, ErrorCode::invalid_argument, "step count must be >= 0");
        if (optimizer_) optimizer_->set_step_count(steps);
    }

  private:
    // The optimizer's tensor of span `span` (-1 for an empty span), after range checks.
    int tensor_of(int span, int slot) const {
        require(span >= 0 && std::size_t(span) < counts_.size(), ErrorCode::invalid_argument,
                "span " + std::to_string(span) + " out of range [0, " + std::to_string(counts_.size()) + ")");
        require(slot >= 0 && slot < slots_, ErrorCode::invalid_argument,
                "state slot " + std::to_string(slot) + " out of range [0, " + std::to_string(slots_) + ")");
        return tensor_of_[std::size_t(span)];
    }

    cudaStream_t stream_;
    std::vector<std::size_t> counts_;
    std::vector<int> tensor_of_;
    std::unique_ptr<cuda::DeviceOptimizer> optimizer_;
    std::vector<const void *> grads_; // step()'s gradients of the non-empty spans (kept: no allocation per step)
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
        require(optimizer.state_precision == StatePrecision::full, ErrorCode::unsupported,
                std::string("state_precision ") + state_precision_name(optimizer.state_precision) +
                    " in cuda memory: the sharded CUDA space keeps full-precision state (a block cut by a shard "
                    "boundary needs its maximum combined across ranks; use full, host memory, or "
                    "cuda::DeviceOptimizer for whole tensors)");
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

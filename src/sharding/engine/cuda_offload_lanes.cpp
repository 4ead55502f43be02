#include "cuda_offload_lanes.hpp"

#include <cstring>

#include "cuda/cuda_check.hpp"
#include "cuda/cuda_device.hpp"
#include "cuda/event_wait.hpp"
#include "host_space.hpp"
#include "shardopt/error.hpp"
#include "sumsq_order.hpp"

namespace shardopt::engine {
namespace {

using cuda::detail::check;
using cuda::detail::DeviceGuard;

// Page-locked host memory, zero-filled, freed with cudaFreeHost (which waits for the device's
// work, so no copy still in flight reads freed memory).
class PinnedSpaceBuffer final : public SpaceBuffer {
  public:
    PinnedSpaceBuffer(int device, std::size_t bytes, const char *what) : device_(device), bytes_(bytes) {
        if (bytes == 0) return;
        DeviceGuard guard(device_);
        // Portable: usable from every device's context, whichever one the caller has current.
        check(cudaHostAlloc(reinterpret_cast<void **>(&data_), bytes, cudaHostAllocPortable),
              ("cudaHostAlloc of " + std::to_string(bytes) + " pinned bytes for " + what).c_str());
        std::memset(data_, 0, bytes);
    }
    ~PinnedSpaceBuffer() override {
        if (data_ == nullptr) return;
        try {
            DeviceGuard guard(device_);
            if (cudaFreeHost(data_) != cudaSuccess) (void)cudaGetLastError();
        } catch (...) { // the device is gone (process teardown)
        }
    }
    unsigned char *data() const noexcept override { return data_; }
    std::size_t bytes() const noexcept override { return bytes_; }

  private:
    int device_;
    std::size_t bytes_;
    unsigned char *data_ = nullptr;
};

} // namespace

CudaOffloadLanes::CudaOffloadLanes(int device, cudaStream_t compute, std::function<Communicator::Duration()> timeout,
                                   int update_threads)
    : device_(device), compute_(compute), timeout_(std::move(timeout)), threads_(update_threads) {
    DeviceGuard guard(device_);
    // Non-blocking: the legacy default stream (the compute stream when none was given) neither
    // waits for the copies nor makes them wait; ordering is only what the events say.
    for (Lane &l : lanes_)
        check(cudaStreamCreateWithFlags(&l.stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags (offload lane)");
    check(cudaEventCreateWithFlags(&follow_, cudaEventDisableTiming), "cudaEventCreateWithFlags (offload lane)");
}

CudaOffloadLanes::~CudaOffloadLanes() {
    try {
        DeviceGuard guard(device_);
        for (Lane &l : lanes_) {
            if (!l.pending.empty()) {
                try {
                    wait(CopyMark{int(&l - lanes_), l.issued});
                } catch (...) { // timed out or failed: the stream is destroyed anyway
                }
            }
            for (auto &p : l.pending) free_events_.push_back(p.second);
            if (l.stream != nullptr && cudaStreamDestroy(l.stream) != cudaSuccess) (void)cudaGetLastError();
        }
        for (cudaEvent_t e : free_events_)
            if (cudaEventDestroy(e) != cudaSuccess) (void)cudaGetLastError();
        if (follow_ != nullptr && cudaEventDestroy(follow_) != cudaSuccess) (void)cudaGetLastError();
    } catch (...) { // the device is gone (process teardown)
    }
}

SpaceBufferPtr CudaOffloadLanes::allocate_pinned(std::size_t bytes, const char *what) {
    return std::make_unique<PinnedSpaceBuffer>(device_, bytes, what);
}

CudaOffloadLanes::Lane &CudaOffloadLanes::lane(const CopyMark &mark) {
    require(mark.lane == 0 || mark.lane == 1, ErrorCode::invalid_argument,
            "offload: copy mark of lane " + std::to_string(mark.lane));
    return lanes_[mark.lane];
}

cudaEvent_t CudaOffloadLanes::take_event() {
    if (!free_events_.empty()) {
        cudaEvent_t e = free_events_.back();
        free_events_.pop_back();
        return e;
    }
    cudaEvent_t e = nullptr;
    check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags (offload copy)");
    return e;
}

void CudaOffloadLanes::reap(Lane &l) {
    while (!l.pending.empty()) {
        const cudaError_t status = cudaEventQuery(l.pending.front().second);
        if (status == cudaErrorNotReady) return;
        check(status, "cudaEventQuery (offload copy)");
        l.done = l.pending.front().first;
        free_events_.push_back(l.pending.front().second);
        l.pending.pop_front();
    }
}

CopyMark CudaOffloadLanes::enqueue(int index, void *dst, const void *src, std::size_t bytes, cudaMemcpyKind kind) {
    if (bytes == 0) return CopyMark{};
    Lane &l = lanes_[index];
    DeviceGuard guard(device_);
    reap(l); // keeps the pending list as short as the copies in flight
    const char *what = index == 0 ? "to the host" : "to the device";
    check(cudaMemcpyAsync(dst, src, bytes, kind, l.stream),
          ("cudaMemcpyAsync of " + std::to_string(bytes) + " bytes " + what + " (offload lane)").c_str());
    cudaEvent_t e = take_event();
    if (const cudaError_t status = cudaEventRecord(e, l.stream); status != cudaSuccess) {
        free_events_.push_back(e);
        check(status, "cudaEventRecord (offload copy)");
    }
    l.pending.emplace_back(++l.issued, e);
    return CopyMark{index, l.issued};
}

CopyMark CudaOffloadLanes::copy_to_host_async(void *host, const void *src, std::size_t bytes) {
    return enqueue(0, host, src, bytes, cudaMemcpyDeviceToHost);
}

CopyMark CudaOffloadLanes::copy_to_device_async(void *dst, const void *host, std::size_t bytes) {
    if (bytes == 0) return CopyMark{};
    {
        DeviceGuard guard(device_);
        // After the compute stream's work so far: the caller's kernels may still read dst.
        check(cudaEventRecord(follow_, compute_), "cudaEventRecord on the compute stream (offload lane)");
        check(cudaStreamWaitEvent(lanes_[1].stream, follow_, 0),
              "cudaStreamWaitEvent: the offload lane after the compute stream");
    }
    return enqueue(1, dst, host, bytes, cudaMemcpyHostToDevice);
}

void CudaOffloadLanes::wait(CopyMark mark) {
    if (mark.empty()) return;
    Lane &l = lane(mark);
    if (mark.seq <= l.done) return;
    DeviceGuard guard(device_);
    cudaEvent_t event = nullptr;
    for (const auto &p : l.pending)
        if (p.first >= mark.seq) {
            event = p.second;
            break;
        }
    require(event != nullptr, ErrorCode::invalid_state,
            "offload: copy " + std::to_string(mark.seq) + " was never issued on its lane");
    const Communicator::Duration limit = timeout_();
    cuda::detail::wait_event(event, cuda::detail::Clock::now() + limit, {}, [&] {
        return "cuda space (device " + std::to_string(device_) + "): waiting for an offload copy " +
               (mark.lane == 0 ? "to the host" : "to the device") + " took longer than the timeout of " +
               std::to_string(limit.count()) + " ms";
    });
    while (!l.pending.empty() && l.pending.front().first <= mark.seq) { // done in lane order
        l.done = l.pending.front().first;
        free_events_.push_back(l.pending.front().second);
        l.pending.pop_front();
    }
}

void CudaOffloadLanes::compute_waits(CopyMark mark) {
    if (mark.empty()) return;
    Lane &l = lane(mark);
    if (mark.seq <= l.done) return;
    for (const auto &p : l.pending)
        if (p.first >= mark.seq) {
            DeviceGuard guard(device_);
            // The wait takes the event's position now: recycling the event later leaves it as is.
            check(cudaStreamWaitEvent(compute_, p.second, 0), "cudaStreamWaitEvent: the compute stream after an offload copy");
            return;
        }
    throw Error(ErrorCode::invalid_state, "offload: copy " + std::to_string(mark.seq) + " was never issued on its lane");
}

std::unique_ptr<SpanUpdater> CudaOffloadLanes::make_host_updater(const std::vector<Span> &params, DType dtype,
                                                                 const OptimizerOptions &options) {
    return engine::make_host_updater(params, dtype, options, threads_);
}

double CudaOffloadLanes::host_sum_of_squares(const std::vector<Span> &spans, DType dtype) {
    return sum_of_squares_in_kernel_order(spans, dtype);
}

} // namespace shardopt::engine

#include "device_comm.hpp"

#include "cuda/cuda_check.hpp"
#include "cuda/cuda_device.hpp"

namespace shardopt::gpu::detail {

DeviceComm::DeviceComm(int device) : device_(device) {
    cuda::detail::DeviceGuard guard(device);
    cuda::detail::check(cudaStreamCreateWithFlags(&own_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
}

// Pending work on the stream still completes: CUDA defers the release until it has.
DeviceComm::~DeviceComm() {
    for (cudaEvent_t e : free_events_) (void)cudaEventDestroy(e);
    if (own_) (void)cudaStreamDestroy(own_);
    (void)cudaGetLastError();
}

cudaStream_t DeviceComm::stream() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return user_ ? user_ : own_;
}

cudaStream_t DeviceComm::user_stream() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return user_;
}

cudaStream_t DeviceComm::caller_stream() const {
    const cudaStream_t user = user_stream();
    return user ? user : cudaStreamLegacy;
}

std::shared_ptr<void> DeviceComm::capture_caller_position(const Call &call) const {
    if (call.kind == CallKind::barrier || call.kind == CallKind::split || call.count == 0) return nullptr;
    cuda::detail::DeviceGuard guard(device_); // the issuing thread may be on another device
    cudaEvent_t event = nullptr;
    {
        std::lock_guard<std::mutex> lock(events_mutex_);
        if (!free_events_.empty()) {
            event = free_events_.back();
            free_events_.pop_back();
        }
    }
    if (!event)
        cuda::detail::check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate at issue");
    // Back to the pool with the last reference (the call has run by then: the communicator's
    // destructor drains its queues before this object goes).
    std::shared_ptr<void> capture(event, [this](void *e) {
        std::lock_guard<std::mutex> lock(events_mutex_);
        free_events_.push_back(static_cast<cudaEvent_t>(e));
    });
    cuda::detail::check(cudaEventRecord(event, caller_stream()), "cudaEventRecord on the caller's stream at issue");
    return capture;
}

void DeviceComm::follow_caller(cudaStream_t stream, const std::shared_ptr<void> &capture) const {
    if (!capture) return;
    cuda::detail::check(cudaStreamWaitEvent(stream, static_cast<cudaEvent_t>(capture.get()), 0),
                        "cudaStreamWaitEvent for the caller's stream");
}

void DeviceComm::set_stream(cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    user_ = stream;
}

int pick_device(int requested, int local_rank, const char *backend) {
    try {
        if (requested >= 0) return cuda::detail::resolve_device(requested);
        const int current = cuda::detail::resolve_device(-1); // throws unsupported without a device
        if (local_rank < 0) return current;
        int count = 0;
        cuda::detail::check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
        // Ranks of one host share its GPUs round robin (several ranks per GPU on the staged path).
        return local_rank % count;
    } catch (const Error &e) {
        throw Error(e.code(), std::string("backend '") + backend + "': " + e.what());
    }
}

} // namespace shardopt::gpu::detail

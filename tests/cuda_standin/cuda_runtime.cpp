// The CUDA runtime calls shardopt's GPU code makes, implemented on the stand-in's streams
// (stream_engine.hpp) and memory (memory_registry.hpp), with the real runtime's signatures from
// cuda_runtime_api.h: a build links these instead of libcudart and runs the same source.
//
// Host-side semantics follow CUDA's "API synchronization behavior":
// - cudaMemcpy from pageable memory to the device stages the bytes and returns before they
//   reach the device (the rest travels on the legacy stream, here always late); to pageable
//   host memory it returns when the copy is done; device to device it does not wait at all;
// - cudaMemcpyAsync and cudaMemsetAsync enqueue on their stream; a copy to pageable host memory
//   still waits for itself; one from pageable memory is staged at the call;
// - cudaMemset on device memory is asynchronous (legacy stream);
// - cudaFree and cudaFreeHost wait for the whole device first.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "memory_registry.hpp"
#include "stream_engine.hpp"
#include "block_executor.hpp"

using namespace cuda_standin;

namespace {

thread_local cudaError_t last_error = cudaSuccess;
thread_local int current_device = 0;

cudaError_t fail(cudaError_t status) {
    last_error = status;
    return status;
}

int device_count() {
    static const int count = [] {
        const char *text = std::getenv("SHARDOPT_CUDA_STANDIN_DEVICES");
        return text ? std::max(0, std::atoi(text)) : 1;
    }();
    return count;
}

// The stream a handle names, or null (invalid handle).
Stream *lookup(cudaStream_t handle) {
    if (handle == cudaStreamPerThread) return nullptr; // not modelled: no caller uses it
    std::lock_guard<std::mutex> lock(engine_mutex());
    return stream_of(handle);
}

std::mutex events_mutex;
std::vector<Event *> &events() {
    static auto *live = new std::vector<Event *>();
    return *live;
}

Event *lookup(cudaEvent_t handle) {
    std::lock_guard<std::mutex> lock(events_mutex);
    auto &live = events();
    auto *h = reinterpret_cast<Event *>(handle);
    return std::find(live.begin(), live.end(), h) == live.end() ? nullptr : h;
}

void wait_all_streams() {
    std::vector<std::pair<Stream *, uint64_t>> points;
    {
        std::lock_guard<std::mutex> lock(engine_mutex());
        for (Stream *s : all_streams()) points.emplace_back(s, 0);
    }
    for (auto &p : points) p.second = p.first->enqueued();
    for (auto &p : points) p.first->wait_for(p.second);
}

// Where a copy's side is, and whether it may be used in that direction.
bool device_side(const void *ptr, std::size_t bytes) { return covers(ptr, bytes, MemoryKind::device); }
bool host_side(const void *ptr, std::size_t bytes) {
    return covers(ptr, bytes, MemoryKind::pinned) || covers(ptr, bytes, MemoryKind::pageable);
}

// The kind a copy really is (cudaMemcpyDefault inferred from the pointers); cudaErrorInvalidValue
// when a pointer is not where its kind says.
cudaError_t resolve(void *dst, const void *src, std::size_t bytes, cudaMemcpyKind &kind) {
    if (bytes == 0) return cudaSuccess;
    if (kind == cudaMemcpyDefault) {
        const bool d_dev = kind_of(dst) == MemoryKind::device, s_dev = kind_of(src) == MemoryKind::device;
        kind = d_dev ? (s_dev ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                     : (s_dev ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
    }
    bool ok = false;
    switch (kind) {
    case cudaMemcpyHostToDevice: ok = host_side(src, bytes) && device_side(dst, bytes); break;
    case cudaMemcpyDeviceToHost: ok = device_side(src, bytes) && host_side(dst, bytes); break;
    case cudaMemcpyDeviceToDevice: ok = device_side(src, bytes) && device_side(dst, bytes); break;
    case cudaMemcpyHostToHost: ok = host_side(src, bytes) && host_side(dst, bytes); break;
    default: ok = false;
    }
    return ok ? cudaSuccess : cudaErrorInvalidValue;
}

// Enqueues a copy on `stream`. A pageable source is staged now (the caller may reuse it at
// once); otherwise the bytes are read when the copy runs, as a DMA would.
uint64_t enqueue_copy(Stream *stream, void *dst, const void *src, std::size_t bytes,
                      Clock::duration extra_delay = Clock::duration::zero()) {
    if (kind_of(src) == MemoryKind::pageable) {
        auto staged = std::make_shared<std::vector<unsigned char>>(static_cast<const unsigned char *>(src),
                                                                   static_cast<const unsigned char *>(src) + bytes);
        return stream->enqueue([dst, staged] { std::memcpy(dst, staged->data(), staged->size()); }, {}, extra_delay);
    }
    return stream->enqueue([dst, src, bytes] { std::memmove(dst, src, bytes); }, {}, extra_delay);
}

// How much later than other work the tail of a synchronous pageable-to-device copy lands:
// SHARDOPT_CUDA_STANDIN_STAGING_LAG_US, default 2 ms (tests that must see the late bytes on a
// loaded machine ask for more).
Clock::duration staging_lag() {
    static const long lag_us = [] {
        const char *text = std::getenv("SHARDOPT_CUDA_STANDIN_STAGING_LAG_US");
        const long value = text ? std::strtol(text, nullptr, 10) : 0;
        return value > 0 ? value : 2000L;
    }();
    return std::chrono::microseconds(lag_us);
}

} // namespace

extern "C" {

cudaError_t cudaGetLastError(void) {
    const cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void) { return last_error; }

const char *cudaGetErrorName(cudaError_t error) {
    switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorNotSupported: return "cudaErrorNotSupported";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    default: return "cudaErrorUnknown";
    }
}

const char *cudaGetErrorString(cudaError_t error) {
    switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorNotSupported: return "operation not supported (by the CUDA stand-in)";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    default: return "unknown error";
    }
}

// --- devices ---------------------------------------------------------------------------------
cudaError_t cudaGetDeviceCount(int *count) {
    if (!count) return fail(cudaErrorInvalidValue);
    *count = device_count();
    return *count > 0 ? cudaSuccess : fail(cudaErrorNoDevice);
}

cudaError_t cudaSetDevice(int device) {
    if (device < 0 || device >= device_count()) return fail(cudaErrorInvalidDevice);
    current_device = device;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device) {
    if (!device) return fail(cudaErrorInvalidValue);
    if (device_count() == 0) return fail(cudaErrorNoDevice);
    *device = current_device;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device) {
    if (!prop) return fail(cudaErrorInvalidValue);
    if (device < 0 || device >= device_count()) return fail(cudaErrorInvalidDevice);
    std::memset(prop, 0, sizeof(*prop));
    std::strncpy(prop->name, "shardopt CUDA stand-in (host memory, worker threads)", sizeof(prop->name) - 1);
    prop->totalGlobalMem = std::size_t(16) << 30;
    prop->major = 9;
    prop->minor = 0;
    prop->multiProcessorCount = 4;
    prop->maxThreadsPerBlock = 1024;
    prop->warpSize = 32;
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
    wait_all_streams();
    return cudaSuccess;
}

cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *attr, const void *func) {
    if (!attr || !func) return fail(cudaErrorInvalidValue);
    std::memset(attr, 0, sizeof(*attr));
    attr->maxThreadsPerBlock = 1024;
    return cudaSuccess;
}

// --- memory ----------------------------------------------------------------------------------
cudaError_t cudaMalloc(void **ptr, size_t size) {
    if (!ptr) return fail(cudaErrorInvalidValue);
    *ptr = allocate(size, MemoryKind::device);
    return *ptr ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

cudaError_t cudaFree(void *ptr) {
    if (!ptr) return cudaSuccess;
    wait_all_streams(); // cudaFree synchronizes the device
    return release(ptr, MemoryKind::device) ? cudaSuccess : fail(cudaErrorInvalidValue);
}

cudaError_t cudaHostAlloc(void **ptr, size_t size, unsigned int) {
    if (!ptr) return fail(cudaErrorInvalidValue);
    *ptr = allocate(size, MemoryKind::pinned);
    return *ptr ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

cudaError_t cudaMallocHost(void **ptr, size_t size) { return cudaHostAlloc(ptr, size, 0); }

cudaError_t cudaFreeHost(void *ptr) {
    if (!ptr) return cudaSuccess;
    wait_all_streams();
    return release(ptr, MemoryKind::pinned) ? cudaSuccess : fail(cudaErrorInvalidValue);
}

cudaError_t cudaMemGetInfo(size_t *free, size_t *total) {
    if (!free || !total) return fail(cudaErrorInvalidValue);
    *total = std::size_t(16) << 30;
    *free = *total;
    return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attributes, const void *ptr) {
    if (!attributes) return fail(cudaErrorInvalidValue);
    std::memset(attributes, 0, sizeof(*attributes));
    switch (kind_of(ptr)) {
    case MemoryKind::device:
        attributes->type = cudaMemoryTypeDevice;
        attributes->device = current_device;
        attributes->devicePointer = const_cast<void *>(ptr);
        break;
    case MemoryKind::pinned:
        attributes->type = cudaMemoryTypeHost;
        attributes->devicePointer = const_cast<void *>(ptr);
        attributes->hostPointer = const_cast<void *>(ptr);
        break;
    case MemoryKind::pageable:
        attributes->type = cudaMemoryTypeUnregistered;
        attributes->device = -2;
        attributes->hostPointer = const_cast<void *>(ptr);
        break;
    }
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t handle) {
    Stream *stream = lookup(handle);
    if (!stream) return fail(cudaErrorInvalidResourceHandle);
    if (const cudaError_t e = resolve(dst, src, count, kind)) return fail(e);
    if (count == 0) return cudaSuccess;
    const uint64_t seq = enqueue_copy(stream, dst, src, count);
    // Into pageable memory (or host to host) the call returns only once the copy is done.
    if (kind == cudaMemcpyHostToHost || (kind == cudaMemcpyDeviceToHost && kind_of(dst) == MemoryKind::pageable))
        stream->wait_for(seq);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind) {
    Stream *legacy = lookup(cudaStream_t{});
    if (const cudaError_t e = resolve(dst, src, count, kind)) return fail(e);
    if (count == 0) return cudaSuccess;
    if (kind == cudaMemcpyDeviceToDevice) { // no host-side synchronization at all
        enqueue_copy(legacy, dst, src, count);
        return cudaSuccess;
    }
    if (kind == cudaMemcpyHostToDevice && kind_of(src) == MemoryKind::pageable) {
        // A stream sync first, then the bytes are staged and the call returns while the last
        // of them are still on their way to the device.
        legacy->wait_for(legacy->enqueue([] {}));
        enqueue_copy(legacy, dst, src, count, staging_lag());
        return cudaSuccess;
    }
    legacy->wait_for(enqueue_copy(legacy, dst, src, count));
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *ptr, int value, size_t count, cudaStream_t handle) {
    Stream *stream = lookup(handle);
    if (!stream) return fail(cudaErrorInvalidResourceHandle);
    if (count == 0) return cudaSuccess;
    if (!covers(ptr, count, MemoryKind::device) && !covers(ptr, count, MemoryKind::pinned))
        return fail(cudaErrorInvalidValue);
    stream->enqueue([ptr, value, count] { std::memset(ptr, value, count); });
    return cudaSuccess;
}

cudaError_t cudaMemset(void *ptr, int value, size_t count) {
    if (const cudaError_t e = cudaMemsetAsync(ptr, value, count, nullptr)) return e;
    if (kind_of(ptr) == MemoryKind::pinned) return cudaDeviceSynchronize(); // synchronous on pinned memory
    return cudaSuccess;
}

// --- streams ---------------------------------------------------------------------------------
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *out, unsigned int flags) {
    if (!out) return fail(cudaErrorInvalidValue);
    auto *stream = new Stream((flags & cudaStreamNonBlocking) == 0, false);
    {
        std::lock_guard<std::mutex> lock(engine_mutex());
        register_stream(stream);
    }
    *out = reinterpret_cast<cudaStream_t>(stream);
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *out) { return cudaStreamCreateWithFlags(out, cudaStreamDefault); }

cudaError_t cudaStreamDestroy(cudaStream_t handle) {
    Stream *stream = lookup(handle);
    if (!stream || stream->legacy()) return fail(cudaErrorInvalidResourceHandle);
    {
        std::lock_guard<std::mutex> lock(engine_mutex());
        forget_stream(stream);
    }
    stream->close();
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t handle) {
    Stream *stream = lookup(handle);
    if (!stream) return fail(cudaErrorInvalidResourceHandle);
    stream->wait_for(stream->enqueued());
    return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t handle) {
    Stream *stream = lookup(handle);
    if (!stream) return fail(cudaErrorInvalidResourceHandle);
    return stream->completed() >= stream->enqueued() ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t handle, cudaHostFn_t fn, void *user_data) {
    Stream *stream = lookup(handle);
    if (!stream) return fail(cudaErrorInvalidResourceHandle);
    if (!fn) return fail(cudaErrorInvalidValue);
    stream->enqueue([fn, user_data] { fn(user_data); });
    return cudaSuccess;
}

// --- events ----------------------------------------------------------------------------------
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *out, unsigned int flags) {
    if (!out) return fail(cudaErrorInvalidValue);
    auto *h = new Event();
    h->timing = (flags & cudaEventDisableTiming) == 0;
    {
        std::lock_guard<std::mutex> lock(events_mutex);
        events().push_back(h);
    }
    *out = reinterpret_cast<cudaEvent_t>(h);
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *out) { return cudaEventCreateWithFlags(out, cudaEventDefault); }

cudaError_t cudaEventDestroy(cudaEvent_t handle) {
    Event *h = lookup(handle);
    if (!h) return fail(cudaErrorInvalidResourceHandle);
    {
        std::lock_guard<std::mutex> lock(events_mutex);
        auto &live = events();
        live.erase(std::remove(live.begin(), live.end(), h), live.end());
    }
    delete h; // a pending record holds only its stamp; waits hold their stream point
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t handle, cudaStream_t stream_handle) {
    Event *event = lookup(handle);
    Stream *stream = lookup(stream_handle);
    if (!event || !stream) return fail(cudaErrorInvalidResourceHandle);
    // The record is an operation of the stream: it completes after all earlier work there.
    auto stamp = std::make_shared<Clock::time_point>();
    const uint64_t seq = stream->enqueue([stamp] { *stamp = Clock::now(); });
    std::lock_guard<std::mutex> lock(engine_mutex());
    event->recorded = true;
    event->point = Dependency{stream, seq};
    event->stamp = stamp;
    return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t handle) {
    Event *h = lookup(handle);
    if (!h) return fail(cudaErrorInvalidResourceHandle);
    std::lock_guard<std::mutex> lock(engine_mutex());
    return !h->recorded || dependency_met(h->point) ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t handle) {
    Event *h = lookup(handle);
    if (!h) return fail(cudaErrorInvalidResourceHandle);
    Dependency point;
    {
        std::lock_guard<std::mutex> lock(engine_mutex());
        if (!h->recorded) return cudaSuccess;
        point = h->point;
    }
    point.stream->wait_for(point.seq);
    return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
    Event *a = lookup(start), *b = lookup(end);
    if (!ms) return fail(cudaErrorInvalidValue);
    if (!a || !b || !a->timing || !b->timing) return fail(cudaErrorInvalidResourceHandle);
    std::lock_guard<std::mutex> lock(engine_mutex());
    if (!a->recorded || !b->recorded) return fail(cudaErrorInvalidResourceHandle);
    if (!dependency_met(a->point) || !dependency_met(b->point)) return fail(cudaErrorNotReady);
    *ms = std::chrono::duration<float, std::milli>(*b->stamp - *a->stamp).count();
    return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream_handle, cudaEvent_t handle, unsigned int) {
    Event *h = lookup(handle);
    Stream *stream = lookup(stream_handle);
    if (!h || !stream) return fail(cudaErrorInvalidResourceHandle);
    Dependency point;
    {
        std::lock_guard<std::mutex> lock(engine_mutex());
        if (!h->recorded) return cudaSuccess; // an event never recorded is complete
        point = h->point;
    }
    stream->enqueue([] {}, {point});
    return cudaSuccess;
}

} // extern "C"

// --- kernel launches (SHARDOPT_LAUNCH in the stand-in build) -----------------------------------
namespace cuda_standin {

void launch_kernel(dim3 grid, dim3 block, cudaStream_t handle, std::function<void()> body) {
    const uint64_t blocks = uint64_t(grid.x) * grid.y * grid.z, threads = uint64_t(block.x) * block.y * block.z;
    if (blocks == 0 || threads == 0 || threads > 1024 || grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535) {
        fail(cudaErrorInvalidConfiguration);
        return;
    }
    Stream *stream = lookup(handle);
    if (!stream) {
        fail(cudaErrorInvalidResourceHandle);
        return;
    }
    stream->enqueue([grid, block, body = std::move(body)] { run_grid(grid, block, body); });
}

} // namespace cuda_standin

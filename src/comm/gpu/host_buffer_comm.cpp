#include "host_buffer_comm.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>

#include "comm/forward_call.hpp"
#include "cuda/event_wait.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/cuda_device.hpp"
#include "shardopt/error.hpp"
#include "shardopt/gpu_comm.hpp"

namespace shardopt::gpu::detail {

using cuda::detail::check;
using cuda::detail::DeviceBuffer;
using cuda::detail::DeviceGuard;

HostBufferComm::HostBufferComm(CommunicatorPtr device_comm)
    : Communicator(device_comm->rank(), device_comm->size()), device_(std::move(device_comm)),
      gpu_(gpu::device_of(*device_)) {
    set_timeout(device_->timeout());
    DeviceGuard guard(gpu_);
    lane_.create(false);
}

HostBufferComm::~HostBufferComm() {
    shutdown_queues();
    try {
        DeviceGuard guard(gpu_); // the device memory is freed on its own device
        in_ = DeviceBuffer();
        out_ = DeviceBuffer();
    } catch (...) { // the device is gone (process teardown): the buffers' destructors still free what they can
    }
    (void)cudaGetLastError(); // the lane and the pinned buffer are released after this body
}

void HostBufferComm::on_abort(const std::string &reason, ErrorCode code) {
    // Peers blocked in the GPU communicator learn it from there.
    device_->abort(reason, code);
}

CommunicatorPtr HostBufferComm::run_split(int color, int key) {
    auto child = device_->split(color, key);
    return child ? std::make_shared<HostBufferComm>(std::move(child)) : nullptr;
}

void *HostBufferComm::reserve(DeviceBuffer &buffer, std::size_t bytes, const char *what) {
    if (buffer.bytes() < bytes) {
        const std::size_t want = std::max(bytes, 2 * buffer.bytes());
        buffer = DeviceBuffer(); // free before allocating: the device may have room for one only
        buffer = DeviceBuffer(want, what);
    }
    return buffer.get();
}

void HostBufferComm::wait(cudaStream_t stream, const Call &call, const char *what) {
    const Communicator::Duration limit = device_->timeout();
    check(cudaEventRecord(lane_.done, stream), "cudaEventRecord");
    cuda::detail::wait_event(
        lane_.done, cuda::detail::Clock::now() + limit,
        [&] {
            const std::string reason = device_->abort_reason();
            if (!reason.empty())
                throw Error(ErrorCode::invalid_state, "host buffers over " + device_->backend_name() + ": " +
                                                          describe(call) + " stopped: the communicator was aborted: " +
                                                          reason);
        },
        [&] {
            return "host buffers over " + device_->backend_name() + ": " + describe(call) + ": " + what +
                   " did not finish within " + std::to_string(limit.count()) + " ms (the device is stuck or busy)";
        });
}

void HostBufferComm::run(const Call &call) {
    Communicator &d = *device_;
    DeviceGuard guard(gpu_); // queue threads start on device 0
    switch (call.kind) {
    case CallKind::barrier: return d.barrier();
    case CallKind::send:
    case CallKind::recv:
        throw Error(ErrorCode::unsupported, "host buffers over " + d.backend_name() + ": " + describe(call) +
                                                ": point-to-point calls are not supported");
    case CallKind::split: throw Error(ErrorCode::internal, "host buffers: unexpected call " + describe(call));
    default: break;
    }
    const MovedBuffers m = moved_buffers(call, rank(), size());
    auto *pinned = static_cast<unsigned char *>(pinned_.reserve(std::max<std::size_t>({m.in_bytes, m.out_bytes, 1})));
    void *din = reserve(in_, m.in_capacity, "host-buffer collective input");
    void *dout = m.in_place ? din : reserve(out_, m.out_capacity, "host-buffer collective output");
    const cudaStream_t stream = gpu::stream_of(d); // where the collective runs: the copies come first there
    if (m.in_bytes > 0) {
        std::memcpy(pinned, m.in_source, m.in_bytes);
        check(cudaMemcpyAsync(din, pinned, m.in_bytes, cudaMemcpyHostToDevice, stream),
              ("host buffers: cudaMemcpyAsync of the input of " + describe(call)).c_str());
    }
    Call on_device = call;
    on_device.send = din;
    on_device.recv = dout;
    forward_call(d, on_device);
    if (m.out_bytes > 0)
        check(cudaMemcpyAsync(pinned, dout, m.out_bytes, cudaMemcpyDeviceToHost, stream),
              ("host buffers: cudaMemcpyAsync of the result of " + describe(call)).c_str());
    // Also when nothing comes back: the next call reuses the pinned input.
    wait(stream, call, m.out_bytes > 0 ? "copying the result to the host" : "the collective");
    if (m.out_bytes > 0) std::memcpy(call.recv, pinned, m.out_bytes);
}

} // namespace shardopt::gpu::detail

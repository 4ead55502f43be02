#include "device_adapter.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "comm/forward_call.hpp"
#include "shardopt/gpu_comm.hpp"

using namespace shardopt;

namespace gpu_test {

namespace {

void cuda(cudaError_t status, const char *what) {
    if (status != cudaSuccess)
        throw Error(ErrorCode::internal, std::string("test adapter: ") + what + ": " + cudaGetErrorString(status));
}

// Device memory for one call, freed when the call ends.
struct Block {
    void *ptr = nullptr;
    explicit Block(std::size_t bytes) { cuda(cudaMalloc(&ptr, bytes ? bytes : 16), "cudaMalloc"); }
    ~Block() { (void)cudaFree(ptr); }
    Block(const Block &) = delete;
    Block &operator=(const Block &) = delete;
};

bool inside(const void *p, const void *base, std::size_t bytes) {
    auto a = reinterpret_cast<std::uintptr_t>(p), b = reinterpret_cast<std::uintptr_t>(base);
    return a >= b && a < b + bytes;
}

} // namespace

DeviceAdapter::DeviceAdapter(CommunicatorPtr device_comm)
    : Communicator(device_comm->rank(), device_comm->size()), device_(std::move(device_comm)) {}

DeviceAdapter::~DeviceAdapter() { shutdown_queues(); }

void DeviceAdapter::on_abort(const std::string &reason, ErrorCode code) { device_->abort(reason, code); }

void DeviceAdapter::sync_timeout() {
    std::lock_guard<std::mutex> lock(timeout_mutex_);
    if (device_->timeout() != timeout()) device_->set_timeout(timeout());
}

CommunicatorPtr DeviceAdapter::run_split(int color, int key) {
    sync_timeout();
    auto child = device_->split(color, key);
    return child ? std::make_shared<DeviceAdapter>(std::move(child)) : nullptr;
}

void DeviceAdapter::run(const Call &call) {
    sync_timeout();
    cuda(cudaSetDevice(gpu::device_of(*device_)), "cudaSetDevice"); // queue threads start on device 0
    if (call.kind == CallKind::barrier) return device_->barrier();
    const std::size_t bytes = call.count * dtype_size(call.dtype), all = bytes * std::size_t(size());
    std::size_t in_bytes = bytes, out_bytes = bytes;
    if (call.kind == CallKind::reduce_scatter) in_bytes = all;
    if (call.kind == CallKind::allgather) out_bytes = all;
    const bool has_in = call.send != nullptr && call.kind != CallKind::recv;
    const bool has_out = call.recv != nullptr && call.kind != CallKind::send;

    // One device block for the enclosing host range when input and output overlap (in place:
    // the same pointer, or one range inside the other as in reduce_scatter and allgather).
    const char *in_p = static_cast<const char *>(call.send), *out_p = static_cast<const char *>(call.recv);
    const bool shared = has_in && has_out &&
                        (in_p == out_p || inside(in_p, out_p, out_bytes) || inside(out_p, in_p, in_bytes));
    const char *host_base = has_in ? in_p : out_p;
    std::size_t span = has_in ? in_bytes : out_bytes;
    if (shared) {
        host_base = std::min(in_p, out_p);
        span = std::size_t(std::max(in_p + in_bytes, out_p + out_bytes) - host_base);
    }
    Block first(span), second(shared || !(has_in && has_out) ? 0 : out_bytes);
    auto device_of_host = [&](const void *p) -> void * {
        return static_cast<char *>(first.ptr) + (static_cast<const char *>(p) - host_base);
    };
    void *dsend = has_in ? device_of_host(call.send) : nullptr;
    void *drecv = !has_out ? nullptr : shared ? device_of_host(call.recv) : has_in ? second.ptr : first.ptr;
    if (shared)
        cuda(cudaMemcpy(first.ptr, host_base, span, cudaMemcpyHostToDevice), "cudaMemcpy to device");
    else if (has_in)
        cuda(cudaMemcpy(dsend, call.send, in_bytes, cudaMemcpyHostToDevice), "cudaMemcpy to device");
    // Outputs start as the host had them: a root's broadcast data, a non-root's untouched bytes.
    if (has_out && !shared) cuda(cudaMemcpy(drecv, call.recv, out_bytes, cudaMemcpyHostToDevice), "cudaMemcpy to device");

    Call on_device = call;
    on_device.send = dsend;
    on_device.recv = drecv;
    forward_call(*device_, on_device);
    if (has_out) cuda(cudaMemcpy(call.recv, drecv, out_bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
}

} // namespace gpu_test

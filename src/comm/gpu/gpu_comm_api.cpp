// The public accessors of gpu_comm.hpp over any GPU communicator.
#include "device_comm.hpp"

#include "../../cuda/cuda_event.hpp"

namespace shardopt::gpu {

namespace {

detail::DeviceComm &device_comm(const Communicator &comm) {
    auto *dev = dynamic_cast<const detail::DeviceComm *>(&comm);
    require(dev != nullptr, ErrorCode::invalid_argument,
            "communicator of backend '" + comm.backend_name() + "' has no device or stream (nccl and staged do)");
    return const_cast<detail::DeviceComm &>(*dev);
}

} // namespace

int device_of(const Communicator &comm) { return device_comm(comm).device(); }
Stream stream_of(const Communicator &comm) { return device_comm(comm).stream(); }
void set_stream(Communicator &comm, Stream stream) { device_comm(comm).set_stream(stream); }

void order_after(Stream consumer, Stream producer) {
    using cuda::detail::check;
    if (consumer == producer) return; // a stream is ordered after itself
    cuda::detail::Event event;        // destroyed right after the wait: CUDA keeps it until it completes
    event.create();
    check(cudaEventRecord(event.get(), producer), "cudaEventRecord on the producer's stream");
    check(cudaStreamWaitEvent(consumer, event.get(), 0), "cudaStreamWaitEvent on the consumer's stream");
}

} // namespace shardopt::gpu

#include "stream_lane.hpp"

#include "cuda/cuda_check.hpp"

namespace shardopt::gpu::detail {

void StreamLane::create(bool own_stream) {
    cuda::detail::check(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreate");
    if (own_stream)
        cuda::detail::check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
}

StreamLane::~StreamLane() {
    if (done) (void)cudaEventDestroy(done);
    if (stream) (void)cudaStreamDestroy(stream);
}

} // namespace shardopt::gpu::detail

// StreamLane: where a GPU communicator runs one kind of call (collectives, sends, receives):
// optionally a stream of its own (else the communicator's stream()) and an event marking
// completion (done). Owns them: create() makes them
// on the current device (throwing Error naming what failed; whatever it made is released by the
// destructor, as always).
#pragma once

#include <cuda_runtime_api.h>

namespace shardopt::gpu::detail {

class StreamLane {
  public:
    StreamLane() = default;
    ~StreamLane();
    StreamLane(const StreamLane &) = delete;
    StreamLane &operator=(const StreamLane &) = delete;

    // own_stream: a non-blocking stream of its own, so the lane never waits behind another.
    void create(bool own_stream);

    cudaStream_t stream = nullptr; // null: the communicator's stream()
    cudaEvent_t done = nullptr;
};

} // namespace shardopt::gpu::detail

// forward_call: runs a Call (what Communicator::run receives) on another communicator, as the
// blocking operation it describes. For communicators that wrap another one and move a call's
// buffers elsewhere first (StagedComm, HostBufferComm, the GPU conformance tests'
// DeviceAdapter): they forward a copy of the call whose send/recv point at the moved buffers.
// moved_buffers says what such a communicator has to move for a collective.
#pragma once

#include <cstddef>

#include "shardopt/comm.hpp"

namespace shardopt {

// Every kind but split (Error(internal)): a communicator's split goes through its run_split.
void forward_call(Communicator &comm, const Call &call);

// What a collective reads and writes, for a wrapper that runs it on buffers of its own:
// in_bytes from in_source copied into the moved input before the call, out_bytes of the moved
// output copied back into call.recv after it, and the sizes the moved buffers need (the
// collective reads or writes them on every rank, whether or not this rank's data travels).
// A broadcast runs in place on one buffer (the moved input; out_capacity is 0): its data
// travels in only at the root and out only elsewhere; a reduce's result comes back only at
// the root. Error(internal) for barrier, send, recv and split, which move nothing or move one
// buffer their own way.
struct MovedBuffers {
    const void *in_source = nullptr;
    std::size_t in_bytes = 0;
    std::size_t out_bytes = 0;
    std::size_t in_capacity = 0;
    std::size_t out_capacity = 0;
    bool in_place = false;
};
MovedBuffers moved_buffers(const Call &call, int rank, int size);

} // namespace shardopt

// forward_call: runs a Call (what Communicator::run receives) on another communicator, as the
// blocking operation it describes. For communicators that wrap another one and move a call's
// buffers elsewhere first (HostBufferComm, the GPU conformance tests' DeviceAdapter): they
// forward a copy of the call whose send/recv point at the moved buffers.
#pragma once

#include "shardopt/comm.hpp"

namespace shardopt {

// Every kind but split (Error(internal)): a communicator's split goes through its run_split.
void forward_call(Communicator &comm, const Call &call);

} // namespace shardopt

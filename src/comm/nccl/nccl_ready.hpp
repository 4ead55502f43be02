// wait_ready: NCCL's non-blocking mode (ncclConfig_t::blocking = 0) returns ncclInProgress from
// init, split, finalize and sometimes from enqueuing a collective; the communicator's state then
// says when the call finished. This polls it with a deadline instead of letting NCCL block.
#pragma once

#include <nccl.h>

#include <functional>

#include "cuda/event_wait.hpp"

namespace shardopt::nccl {

using cuda::detail::Clock;

// The result of comm's pending call: ncclSuccess, its error, or ncclInProgress when `deadline`
// passed first. `check` runs between polls and may throw (a lost peer) to stop waiting.
ncclResult_t wait_ready(ncclComm_t comm, Clock::time_point deadline, const std::function<void()> &check);

// A config for a communicator that never blocks the calling thread inside NCCL.
ncclConfig_t nonblocking_config();

} // namespace shardopt::nccl

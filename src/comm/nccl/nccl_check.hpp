// NCCL results as shardopt::Error: the code says what kind of failure it was; the message names
// the call and carries NCCL's error string and its last error text for the communicator.
#pragma once

#include <nccl.h>

#include <string>

#include "shardopt/error.hpp"

namespace shardopt::nccl {

ErrorCode error_code_for(ncclResult_t result) noexcept;

// "ncclAllReduce failed: ncclRemoteError: remote process exited or there was a network error
// (NCCL: <last error>)".
std::string describe_result(ncclResult_t result, ncclComm_t comm, const std::string &what);

// Throws unless result is ncclSuccess (callers deal with ncclInProgress before calling this).
void check(ncclResult_t result, ncclComm_t comm, const std::string &what);

} // namespace shardopt::nccl

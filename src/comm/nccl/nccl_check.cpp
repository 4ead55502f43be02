#include "nccl_check.hpp"

#include "nccl_library.hpp"

namespace shardopt::nccl {

ErrorCode error_code_for(ncclResult_t result) noexcept {
    switch (result) {
    case ncclSuccess: return ErrorCode::ok;
    case ncclInvalidArgument:
    case ncclInvalidUsage: return ErrorCode::invalid_argument;
    // NCCL's word for a peer that exited or a broken network link.
    case ncclRemoteError: return ErrorCode::peer_lost;
    // A failed CUDA call leaves the context or the communicator unusable.
    case ncclUnhandledCudaError: return ErrorCode::invalid_state;
    case ncclInProgress: return ErrorCode::timeout;
    // ncclSystemError, ncclInternalError: the communicator cannot be used any more.
    default: return ErrorCode::invalid_state;
    }
}

std::string describe_result(ncclResult_t result, ncclComm_t comm, const std::string &what) {
    std::string text = what + " failed: " + api().ncclGetErrorString(result);
    const char *last = api().ncclGetLastError(comm);
    if (last && *last) text += std::string(" (NCCL: ") + last + ")";
    return text;
}

void check(ncclResult_t result, ncclComm_t comm, const std::string &what) {
    if (result == ncclSuccess) return;
    throw Error(error_code_for(result), describe_result(result, comm, what));
}

} // namespace shardopt::nccl

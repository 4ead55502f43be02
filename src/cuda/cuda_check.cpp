#include "cuda_check.hpp"

#include <string>

namespace shardopt::cuda::detail {

ErrorCode error_code_for(cudaError_t status) noexcept {
    switch (status) {
    case cudaSuccess: return ErrorCode::ok;
    case cudaErrorMemoryAllocation: return ErrorCode::out_of_memory;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevice:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidResourceHandle: // a destroyed or foreign stream
        return ErrorCode::invalid_argument;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorCallRequiresNewerDriver:
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
        return ErrorCode::unsupported;
    // Sticky errors: the context is unusable until the process ends.
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidPc:
    case cudaErrorECCUncorrectable:
        return ErrorCode::invalid_state;
    default: return ErrorCode::internal;
    }
}

void check(cudaError_t status, const char *what) {
    if (status == cudaSuccess) return;
    // The runtime also records a failed call as its "last error"; clear it so the next
    // check_launch reports its own launch, not this old failure.
    (void)cudaGetLastError();
    throw Error(error_code_for(status), std::string(what) + " failed: " + cudaGetErrorName(status) + ": " +
                                            cudaGetErrorString(status));
}

void check_launch(const char *kernel) { check(cudaGetLastError(), (std::string("launch of ") + kernel).c_str()); }

} // namespace shardopt::cuda::detail

// The GPU communicators in a build that lacks what they need: the API exists, so callers
// compile the same everywhere, and each entry point says what is missing.
#include "shardopt/gpu_comm.hpp"

namespace shardopt::gpu {

#ifndef SHARDOPT_HAVE_NCCL
bool nccl_available() noexcept { return false; }

CommunicatorPtr create_nccl_communicator(const BootstrapConfig &, const GpuCommOptions &) {
#ifdef SHARDOPT_HAVE_CUDA
    const char *why = "nccl.h was not found at configure time (set NCCL_INCLUDE_DIR)";
#else
    const char *why = "it was built without CUDA (SHARDOPT_WITH_CUDA=OFF or no CUDA toolkit at configure time)";
#endif
    throw Error(ErrorCode::unsupported, std::string("backend 'nccl' is not available: this shardopt has no NCCL "
                                                    "backend because ") + why + "; backend 'staged' runs device "
                                                    "buffers over UCX where CUDA is built");
}
#endif

#if !defined(SHARDOPT_HAVE_CUDA) || !defined(SHARDOPT_HAVE_UCX)
bool staged_available() noexcept { return false; }

CommunicatorPtr create_staged_communicator(const BootstrapConfig &, const GpuCommOptions &) {
    throw Error(ErrorCode::unsupported, "backend 'staged' is not available: it needs both CUDA and UCX, and this "
                                        "shardopt was built without "
#ifdef SHARDOPT_HAVE_CUDA
                                        "UCX (install libucx-dev and rebuild)"
#else
                                        "CUDA (SHARDOPT_WITH_CUDA=OFF or no CUDA toolkit at configure time)"
#endif
    );
}
#endif

#ifndef SHARDOPT_HAVE_CUDA
namespace {
[[noreturn]] void no_device(const Communicator &comm) {
    throw Error(ErrorCode::invalid_argument, "communicator of backend '" + comm.backend_name() +
                                                 "' has no device or stream (this shardopt was built without CUDA)");
}
} // namespace

int device_of(const Communicator &comm) { no_device(comm); }
Stream stream_of(const Communicator &comm) { no_device(comm); }
void set_stream(Communicator &comm, Stream) { no_device(comm); }
void order_after(Stream, Stream) {
    throw Error(ErrorCode::unsupported, "ordering CUDA streams: this shardopt was built without CUDA");
}
#endif

} // namespace shardopt::gpu

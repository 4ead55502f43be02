#include "nccl_ready.hpp"

#include "nccl_library.hpp"

namespace shardopt::nccl {

ncclResult_t wait_ready(ncclComm_t comm, Clock::time_point deadline, const std::function<void()> &check) {
    cuda::detail::Backoff backoff;
    for (;;) {
        ncclResult_t state = ncclInProgress;
        const ncclResult_t r = api().ncclCommGetAsyncError(comm, &state);
        if (r != ncclSuccess) return r;
        if (state != ncclInProgress) return state;
        if (check) check();
        if (Clock::now() >= deadline) return ncclInProgress;
        backoff.pause();
    }
}

ncclConfig_t nonblocking_config() {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    return config;
}

} // namespace shardopt::nccl

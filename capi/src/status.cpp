// Version, status names and the thread-local last error message.
#include <cstdio>

#include "capi_internal.hpp"

namespace {
thread_local char last_error[1024] = "";
}

namespace shardopt::capi {

shardopt_status fail(ErrorCode code, const char *function, const char *message) noexcept {
    std::snprintf(last_error, sizeof last_error, "%s: %s", function, message ? message : "");
    return shardopt_status(int(code));
}

} // namespace shardopt::capi

extern "C" {

SHARDOPT_API unsigned shardopt_version(void) { return SHARDOPT_VERSION_NUMBER; }
SHARDOPT_API unsigned shardopt_abi_version(void) { return SHARDOPT_ABI_VERSION; }

SHARDOPT_API const char *shardopt_status_name(shardopt_status status) {
    switch (status) {
    case SHARDOPT_OK: return "SHARDOPT_OK";
    case SHARDOPT_ERR_INVALID_ARGUMENT: return "SHARDOPT_ERR_INVALID_ARGUMENT";
    case SHARDOPT_ERR_INVALID_STATE: return "SHARDOPT_ERR_INVALID_STATE";
    case SHARDOPT_ERR_TIMEOUT: return "SHARDOPT_ERR_TIMEOUT";
    case SHARDOPT_ERR_MISMATCH: return "SHARDOPT_ERR_MISMATCH";
    case SHARDOPT_ERR_PEER_LOST: return "SHARDOPT_ERR_PEER_LOST";
    case SHARDOPT_ERR_IO: return "SHARDOPT_ERR_IO";
    case SHARDOPT_ERR_CORRUPT: return "SHARDOPT_ERR_CORRUPT";
    case SHARDOPT_ERR_OUT_OF_MEMORY: return "SHARDOPT_ERR_OUT_OF_MEMORY";
    case SHARDOPT_ERR_UNSUPPORTED: return "SHARDOPT_ERR_UNSUPPORTED";
    case SHARDOPT_ERR_INTERNAL: return "SHARDOPT_ERR_INTERNAL";
    }
    return "SHARDOPT_ERR_UNKNOWN";
}

SHARDOPT_API const char *shardopt_last_error_message(void) { return last_error; }

} // extern "C"

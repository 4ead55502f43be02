// Version, status names and the thread-local last error message.
#include <cstdio>

#include "capi_internal.hpp"
#include "shardopt/optim.hpp"

namespace {
thread_local char last_error[1024] = "";
thread_local int last_error_rank = -1;
} // namespace

namespace shardopt::capi {

thread_local int call_rank = -1;

shardopt_status fail(ErrorCode code, const char *function, const char *message) noexcept {
    std::snprintf(last_error, sizeof last_error, "%s: %s", function, message ? message : "");
    last_error_rank = call_rank;
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
SHARDOPT_API int shardopt_last_error_rank(void) { return last_error_rank; }

} // extern "C"

// The C enums are the C++ ones, value for value.
static_assert(int(shardopt::ErrorCode::invalid_argument) == SHARDOPT_ERR_INVALID_ARGUMENT &&
                  int(shardopt::ErrorCode::invalid_state) == SHARDOPT_ERR_INVALID_STATE &&
                  int(shardopt::ErrorCode::timeout) == SHARDOPT_ERR_TIMEOUT &&
                  int(shardopt::ErrorCode::mismatch) == SHARDOPT_ERR_MISMATCH &&
                  int(shardopt::ErrorCode::peer_lost) == SHARDOPT_ERR_PEER_LOST &&
                  int(shardopt::ErrorCode::io) == SHARDOPT_ERR_IO && int(shardopt::ErrorCode::corrupt) == SHARDOPT_ERR_CORRUPT &&
                  int(shardopt::ErrorCode::out_of_memory) == SHARDOPT_ERR_OUT_OF_MEMORY &&
                  int(shardopt::ErrorCode::unsupported) == SHARDOPT_ERR_UNSUPPORTED &&
                  int(shardopt::ErrorCode::internal) == SHARDOPT_ERR_INTERNAL,
              "shardopt_status must equal ErrorCode");
static_assert(int(shardopt::DType::u8) == SHARDOPT_U8 && int(shardopt::DType::bf16) == SHARDOPT_BF16 &&
                  int(shardopt::ReduceOp::prod) == SHARDOPT_PROD &&
                  int(shardopt::OptimizerKind::lamb) == SHARDOPT_LAMB &&
                  int(shardopt::OptimizerKind::lion) == SHARDOPT_LION &&
                  int(shardopt::OptimizerKind::muon) == SHARDOPT_MUON &&
                  int(shardopt::StatePrecision::bits8) == SHARDOPT_STATE_8BIT &&
                  int(shardopt::StatePrecision::bits4) == SHARDOPT_STATE_4BIT &&
                  int(shardopt::MuonLrAdjust::spectral_unclamped) == SHARDOPT_MUON_LR_SPECTRAL_UNCLAMPED &&
                  int(shardopt::Strategy::local_sgd) == SHARDOPT_LOCAL_SGD && int(shardopt::Strategy::fsdp) == SHARDOPT_FSDP,
              "C enums must equal the C++ ones");

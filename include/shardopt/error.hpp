// The one exception type the C++ core throws; the C ABI maps its code to a status.
#pragma once

#include <stdexcept>
#include <string>

namespace shardopt {

// Values are part of the C ABI (shardopt_status): never renumber.
enum class ErrorCode : int {
    ok = 0,
    invalid_argument = 1, // null pointer, bad size, bad dtype, rank out of range
    invalid_state = 2,    // call not allowed now (e.g. step before grads, aborted communicator)
    timeout = 3,          // a peer did not arrive within the communicator's timeout
    mismatch = 4,         // ranks called different collectives / shapes at the same step
    peer_lost = 5,        // a peer process died or its connection broke
    io = 6,               // file system error
    corrupt = 7,          // a checkpoint or network frame failed validation
    out_of_memory = 8,    // allocation failed or a plan would not fit
    unsupported = 9,      // feature not built in or not available on this backend
    internal = 10,        // a bug in shardopt
};

const char *error_code_name(ErrorCode code) noexcept;

class Error : public std::runtime_error {
  public:
    Error(ErrorCode code, const std::string &message) : std::runtime_error(message), code_(code) {}
    ErrorCode code() const noexcept { return code_; }

  private:
    ErrorCode code_;
};

// Throws Error(code, message) when cond is false; keeps argument checks one line each.
inline void require(bool cond, ErrorCode code, const std::string &message) {
    if (!cond) throw Error(code, message);
}

} // namespace shardopt

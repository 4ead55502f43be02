// How an on/off environment variable (SHARDOPT_SHM, SHARDOPT_CMA, SHARDOPT_HIERARCHY, ...) says
// "off": a value starting with 0, n or N ("0", "no", "No"). Anything else set means on; what an
// unset (or, for some, empty) variable means is each caller's default.
#pragma once

namespace shardopt {

inline bool switched_off(const char *value) { return value[0] == '0' || value[0] == 'n' || value[0] == 'N'; }

} // namespace shardopt

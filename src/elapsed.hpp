// Seconds since a steady-clock time point, for the timings the library reports.
#pragma once

#include <chrono>

namespace shardopt {

inline double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

} // namespace shardopt

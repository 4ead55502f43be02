// Waiting out an operation after something else failed: its own error no longer matters, only
// that it is over, so that nothing still reads or writes the buffers it was given.
#pragma once

#include "shardopt/work.hpp"

namespace shardopt {

inline void finish_quietly(WorkPtr &work) noexcept {
    if (!work) return;
    try {
        work->wait();
    } catch (...) { // the operation failed too; all that matters is that it is over
    }
    work.reset();
}

} // namespace shardopt

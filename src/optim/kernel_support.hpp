// What every update rule's CPU kernels share: run-time options turned into compile-time flags,
// so each variant is its own branch-free loop that GCC vectorizes, and the per-call checks.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "shardopt/error.hpp"
#include "shardopt/optim.hpp"

namespace shardopt::optim_kernels {

// Calls f with one std::bool_constant per run-time flag: with_flags(f, a, b) calls
// f(std::true_type{}, std::false_type{}) when a is true and b false.
template <typename F> void with_flags(F &&f) { f(); }
template <typename F, typename... Flags> void with_flags(F &&f, bool first, Flags... rest) {
    if (first)
        with_flags([&](auto... more) { f(std::true_type{}, more...); }, rest...);
    else
        with_flags([&](auto... more) { f(std::false_type{}, more...); }, rest...);
}

// Kernels apply `maximize` as grad * sign: multiplying by -1 is exact, so this is the same
// value as negating the gradient, without a second copy of every loop.
inline double gradient_sign(const OptimizerOptions &options) { return options.maximize ? -1.0 : 1.0; }

// Checks what a kernel is about to dereference. Kernels read state[0 .. state_slots).
template <typename T> void check_segment(const Segment<T> &seg, int state_slots, int64_t step) {
    require(step >= 1, ErrorCode::invalid_argument, "step must be >= 1 (steps count from 1)");
    if (seg.count == 0) return;
    require(seg.param != nullptr, ErrorCode::invalid_argument, "segment param must not be null");
    require(seg.grad != nullptr, ErrorCode::invalid_argument, "segment grad must not be null");
    for (int k = 0; k < state_slots; ++k)
        if (seg.state[k] == nullptr)
            throw Error(ErrorCode::invalid_argument,
                        "segment state[" + std::to_string(k) + "] must not be null");
}

} // namespace shardopt::optim_kernels

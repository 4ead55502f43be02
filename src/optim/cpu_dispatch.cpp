#include "cpu_dispatch.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace shardopt::optim_kernels {
namespace {

bool detect_avx2() noexcept {
    const char *env = std::getenv("SHARDOPT_CPU_KERNELS");
    if (env && std::strcmp(env, "generic") == 0) return false;
#if defined(__x86_64__) && defined(__GNUC__)
    return __builtin_cpu_supports("avx2");
#else
    return false;
#endif
}

std::atomic<bool> &avx2_flag() noexcept {
    static std::atomic<bool> flag{detect_avx2()};
    return flag;
}

} // namespace

bool use_avx2() noexcept { return avx2_flag().load(std::memory_order_relaxed); }

void force_generic_kernels(bool generic) noexcept {
    avx2_flag().store(generic ? false : detect_avx2(), std::memory_order_relaxed);
}

} // namespace shardopt::optim_kernels

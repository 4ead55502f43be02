// Which compiled variant of the update loops runs: the baseline x86-64 (SSE2) loops or the AVX2
// ones, chosen once from the CPU. Both give bitwise the same results (no FMA, same IEEE
// operations per element); SHARDOPT_CPU_KERNELS=generic or force_generic_kernels(true) (tests,
// benchmarks) picks the baseline.
#pragma once

namespace shardopt::optim_kernels {

bool use_avx2() noexcept;
void force_generic_kernels(bool generic) noexcept;

} // namespace shardopt::optim_kernels

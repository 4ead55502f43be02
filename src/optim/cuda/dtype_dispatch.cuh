// Host side: a DType turned into the device element type the kernel templates take.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>
#include <type_traits>

#include "kernel_launch.cuh"
#include "shardopt/error.hpp"
#include "shardopt/types.hpp"

namespace shardopt::cuda::detail {

// Calls f((P *)nullptr) with P = float, __nv_bfloat16 or __half.
template <class F> void with_param_type(DType dtype, F &&f) {
    switch (dtype) {
    case DType::f32: f(static_cast<float *>(nullptr)); return;
    case DType::bf16: f(static_cast<__nv_bfloat16 *>(nullptr)); return;
    case DType::f16: f(static_cast<__half *>(nullptr)); return;
    default: break;
    }
    throw Error(ErrorCode::internal, std::string("CUDA kernels have no ") + dtype_name(dtype) + " variant");
}

// The host entry points of an element-wise rule kernel template `kernel<P>(tensors, chunks,
// scalars, flags)`: launch_<name> (one launch over every chunk) and preload_<name> (load the
// kernel now, so CUDA's lazy loading cannot block the first step).
#define SHARDOPT_RULE_ENTRY_POINTS(name, kernel)                                                          \
    void launch_##name(const ChunkLaunch &launch) {                                                        \
        with_param_type(launch.dtype, [&](auto *tag) {                                                     \
            using P = std::remove_pointer_t<decltype(tag)>;                                                \
            SHARDOPT_LAUNCH(kernel<P>, launch.chunk_count, kBlockThreads, 0, launch.stream)(                  \
                launch.tensors, launch.chunks, launch.scalars, launch.flags);                                      \
        });                                                                                                \
        check_launch(#kernel);                                                                             \
    }                                                                                                      \
    void preload_##name(DType dtype) {                                                                     \
        with_param_type(dtype, [&](auto *tag) {                                                            \
            using P = std::remove_pointer_t<decltype(tag)>;                                                \
            cudaFuncAttributes attributes{};                                                               \
            check(cudaFuncGetAttributes(&attributes, kernel<P>), "loading " #kernel);                      \
        });                                                                                                \
    }

} // namespace shardopt::cuda::detail

// Host side: a DType turned into the device element type the kernel templates take.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>
#include <type_traits>

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

} // namespace shardopt::cuda::detail

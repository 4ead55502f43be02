#include "nccl_types.hpp"

#include "shardopt/error.hpp"

namespace shardopt::nccl {

ncclDataType_t to_nccl(DType dtype) {
    switch (dtype) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::f16: return ncclFloat16;
    case DType::bf16: return ncclBfloat16;
    case DType::i32: return ncclInt32;
    case DType::i64: return ncclInt64;
    case DType::u8: return ncclUint8;
    }
    throw Error(ErrorCode::invalid_argument, "nccl: invalid dtype");
}

ncclRedOp_t to_nccl(ReduceOp op) {
    switch (op) {
    case ReduceOp::sum: return ncclSum;
    // NCCL: floats sum x * (1/n); integers sum then divide, truncating toward zero.
    case ReduceOp::avg: return ncclAvg;
    case ReduceOp::min: return ncclMin;
    case ReduceOp::max: return ncclMax;
    case ReduceOp::prod: return ncclProd;
    }
    throw Error(ErrorCode::invalid_argument, "nccl: invalid reduce op");
}

} // namespace shardopt::nccl

#include "shardopt/error.hpp"
#include "shardopt/types.hpp"

namespace shardopt {

std::size_t dtype_size(DType dtype) noexcept {
    switch (dtype) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::u8: return 1;
    }
    return 0;
}

const char *dtype_name(DType dtype) noexcept {
    switch (dtype) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::u8: return "u8";
    }
    return "invalid-dtype";
}

const char *reduce_op_name(ReduceOp op) noexcept {
    switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::avg: return "avg";
    case ReduceOp::min: return "min";
    case ReduceOp::max: return "max";
    case ReduceOp::prod: return "prod";
    }
    return "invalid-op";
}

bool is_valid(DType dtype) noexcept { return dtype_size(dtype) != 0; }
bool is_valid(ReduceOp op) noexcept { return int(op) >= 0 && int(op) < kReduceOpCount; }
bool is_floating(DType dtype) noexcept {
    return dtype == DType::f32 || dtype == DType::f64 || dtype == DType::f16 || dtype == DType::bf16;
}

const char *error_code_name(ErrorCode code) noexcept {
    switch (code) {
    case ErrorCode::ok: return "ok";
    case ErrorCode::invalid_argument: return "invalid argument";
    case ErrorCode::invalid_state: return "invalid state";
    case ErrorCode::timeout: return "timeout";
    case ErrorCode::mismatch: return "mismatch";
    case ErrorCode::peer_lost: return "peer lost";
    case ErrorCode::io: return "i/o error";
    case ErrorCode::corrupt: return "corrupt data";
    case ErrorCode::out_of_memory: return "out of memory";
    case ErrorCode::unsupported: return "unsupported";
    case ErrorCode::internal: return "internal error";
    }
    return "unknown error";
}

} // namespace shardopt

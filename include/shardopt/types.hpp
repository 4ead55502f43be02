// Element types and reduction operators shared by every layer of shardopt.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace shardopt {

// Values are part of the C ABI (shardopt_dtype) and of checkpoint files: never renumber.
enum class DType : int32_t { f32 = 0, f64 = 1, f16 = 2, bf16 = 3, i32 = 4, i64 = 5, u8 = 6 };

// Values are part of the C ABI (shardopt_reduce_op): never renumber.
enum class ReduceOp : int32_t { sum = 0, avg = 1, min = 2, max = 3, prod = 4 };

inline constexpr int kDTypeCount = 7;
inline constexpr int kReduceOpCount = 5;

// Bytes per element; 0 for an out-of-range value.
std::size_t dtype_size(DType dtype) noexcept;
const char *dtype_name(DType dtype) noexcept;
const char *reduce_op_name(ReduceOp op) noexcept;
bool is_valid(DType dtype) noexcept;
bool is_valid(ReduceOp op) noexcept;
bool is_floating(DType dtype) noexcept;

// C++ type -> DType, for templated code.
template <typename T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::f64; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::i32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::i64; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::u8; };

} // namespace shardopt

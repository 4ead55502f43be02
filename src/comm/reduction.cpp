#include "reduction.hpp"

#include <algorithm>
#include <cstdint>

#include "shardopt/error.hpp"
#include "shardopt/half.hpp"

namespace shardopt {
namespace {

// Storage type S, accumulated as A.
template <typename S> struct Acc { using type = S; };
template <> struct Acc<f16> { using type = float; };
template <> struct Acc<bf16> { using type = float; };

template <typename S> inline typename Acc<S>::type load(S v) { return static_cast<typename Acc<S>::type>(v); }
template <typename S, typename A> inline S store(A v) { return static_cast<S>(v); }
template <> inline f16 store<f16, float>(float v) { return f16(v); }
template <> inline bf16 store<bf16, float>(float v) { return bf16(v); }

template <typename A> inline A apply(ReduceOp op, A a, A b) {
    switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return A(a + b);
    case ReduceOp::prod: return A(a * b);
    case ReduceOp::min: return b < a ? b : a;
    case ReduceOp::max: return a < b ? b : a;
    }
    return a;
}

// Same loop per op so the compiler vectorizes each one.
template <typename A, typename Fn> inline void combine_block(A *acc, const A *in, std::size_t n, Fn fn) {
    for (std::size_t i = 0; i < n; ++i) acc[i] = fn(acc[i], in[i]);
}

template <typename A> void combine_acc(A *acc, const A *in, std::size_t n, ReduceOp op) {
    switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: combine_block(acc, in, n, [](A a, A b) { return A(a + b); }); break;
    case ReduceOp::prod: combine_block(acc, in, n, [](A a, A b) { return A(a * b); }); break;
    case ReduceOp::min: combine_block(acc, in, n, [](A a, A b) { return b < a ? b : a; }); break;
    case ReduceOp::max: combine_block(acc, in, n, [](A a, A b) { return a < b ? b : a; }); break;
    }
}

template <typename S> void reduce_typed(const void *const *inputs, int n_inputs, void *out_raw, std::size_t count,
                                        ReduceOp op) {
    using A = typename Acc<S>::type;
    if constexpr (std::is_same_v<A, S>) {
        // Two inputs of a natively computed type (the ring's case): one pass, no staging.
        if (n_inputs == 2 && op != ReduceOp::avg) {
            const S *a = static_cast<const S *>(inputs[0]), *b = static_cast<const S *>(inputs[1]);
            S *out = static_cast<S *>(out_raw);
            switch (op) {
            case ReduceOp::sum: for (std::size_t i = 0; i < count; ++i) out[i] = S(a[i] + b[i]); return;
            case ReduceOp::prod: for (std::size_t i = 0; i < count; ++i) out[i] = S(a[i] * b[i]); return;
            case ReduceOp::min: for (std::size_t i = 0; i < count; ++i) out[i] = b[i] < a[i] ? b[i] : a[i]; return;
            case ReduceOp::max: for (std::size_t i = 0; i < count; ++i) out[i] = a[i] < b[i] ? b[i] : a[i]; return;
            default: break;
            }
        }
    }
    constexpr std::size_t kBlock = 2048;
    A acc[kBlock];
    A tmp[kBlock];
    S *out = static_cast<S *>(out_raw);
    for (std::size_t base = 0; base < count; base += kBlock) {
        const std::size_t n = std::min(kBlock, count - base);
        const S *first = static_cast<const S *>(inputs[0]) + base;
        for (std::size_t i = 0; i < n; ++i) acc[i] = load(first[i]);
        for (int r = 1; r < n_inputs; ++r) {
            const S *in = static_cast<const S *>(inputs[r]) + base;
            if constexpr (std::is_same_v<A, S>) {
                combine_acc(acc, in, n, op);
            } else {
                for (std::size_t i = 0; i < n; ++i) tmp[i] = load(in[i]);
                combine_acc(acc, tmp, n, op);
            }
        }
        if (op == ReduceOp::avg)
            for (std::size_t i = 0; i < n; ++i) acc[i] = A(acc[i] / A(n_inputs));
        for (std::size_t i = 0; i < n; ++i) out[base + i] = store<S, A>(acc[i]);
    }
}

template <typename S> void combine_typed(void *inout_raw, const void *in_raw, std::size_t count, ReduceOp op) {
    S *inout = static_cast<S *>(inout_raw);
    const S *in = static_cast<const S *>(in_raw);
    if constexpr (std::is_same_v<typename Acc<S>::type, S>) {
        combine_acc(inout, in, count, op);
    } else {
        for (std::size_t i = 0; i < count; ++i) inout[i] = store<S>(apply(op, load(inout[i]), load(in[i])));
    }
}

template <typename S> void divide_typed(void *buf_raw, std::size_t count, int divisor) {
    using A = typename Acc<S>::type;
    S *buf = static_cast<S *>(buf_raw);
    for (std::size_t i = 0; i < count; ++i) buf[i] = store<S>(A(load(buf[i]) / A(divisor)));
}

template <template <typename> class Fn, typename... Args> void dispatch(DType dtype, Args &&...args) {
    switch (dtype) {
    case DType::f32: return Fn<float>::run(args...);
    case DType::f64: return Fn<double>::run(args...);
    case DType::f16: return Fn<f16>::run(args...);
    case DType::bf16: return Fn<bf16>::run(args...);
    case DType::i32: return Fn<int32_t>::run(args...);
    case DType::i64: return Fn<int64_t>::run(args...);
    case DType::u8: return Fn<uint8_t>::run(args...);
    }
    throw Error(ErrorCode::invalid_argument, "reduction: invalid dtype");
}

template <typename S> struct ReduceFn {
    static void run(const void *const *inputs, int n, void *out, std::size_t count, ReduceOp op) {
        reduce_typed<S>(inputs, n, out, count, op);
    }
};
template <typename S> struct CombineFn {
    static void run(void *inout, const void *in, std::size_t count, ReduceOp op) {
        combine_typed<S>(inout, in, count, op);
    }
};
template <typename S> struct DivideFn {
    static void run(void *buf, std::size_t count, int divisor) { divide_typed<S>(buf, count, divisor); }
};

} // namespace

void reduce_inputs(const void *const *inputs, int n_inputs, void *out, std::size_t count, DType dtype,
                   ReduceOp op) {
    if (count == 0) return;
    dispatch<ReduceFn>(dtype, inputs, n_inputs, out, count, op);
}

void combine_into(void *inout, const void *in, std::size_t count, DType dtype, ReduceOp op) {
    if (count == 0) return;
    dispatch<CombineFn>(dtype, inout, in, count, op);
}

void divide_by_count(void *buf, std::size_t count, DType dtype, int divisor) {
    if (count == 0) return;
    dispatch<DivideFn>(dtype, buf, count, divisor);
}

} // namespace shardopt

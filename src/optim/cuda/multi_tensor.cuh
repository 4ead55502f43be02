// Device side of the multi-tensor kernels: element types, 16-byte vector accesses, and the loop
// over one chunk that uses them wherever every array of the update allows.
//
// A chunk's arrays (gradient, parameters, master weights, state) may each start anywhere a
// value of their type may (a tensor at an odd offset of a flat buffer, a caller's view). The
// loop does single elements until every array is 16-byte aligned together, then whole vectors
// (4 floats, or 8 bf16/f16 with their 8 floats), then single elements for the tail. When the
// arrays can never be aligned together (a gradient offset by one element from its parameter),
// the whole chunk goes element by element: slower, same results.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "tensor_table.hpp"

namespace shardopt::cuda::detail {

// Elements per vector step: 16 bytes of the parameter/gradient type.
template <class P> inline constexpr int kVectorWidth = sizeof(P) == 4 ? 4 : 8;

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }

// Round to nearest even, as shardopt::bf16 / shardopt::f16 do on the host.
template <class T> __device__ __forceinline__ T from_float(float x);
template <> __device__ __forceinline__ float from_float<float>(float x) { return x; }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
    return __float2bfloat16_rn(x);
}
template <> __device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }

// L consecutive elements at ptr, as floats. L > 1 only where ptr is 16-byte aligned.
// __ldcg / __stcg: explicitly global accesses (the table's pointers would otherwise be
// generic), cached in L2 only: every element is touched once per step.
template <int L, class T> __device__ __forceinline__ void load(const T *ptr, float (&out)[L]) {
    if constexpr (L == 1) {
        out[0] = to_float(__ldcg(ptr));
    } else {
        static_assert(L * sizeof(T) % 16 == 0, "vector accesses move whole 16-byte words");
        constexpr int kWords = int(L * sizeof(T) / 16);
        uint4 words[kWords];
#pragma unroll
        for (int w = 0; w < kWords; ++w) words[w] = __ldcg(reinterpret_cast<const uint4 *>(ptr) + w);
        const T *values = reinterpret_cast<const T *>(words);
#pragma unroll
        for (int k = 0; k < L; ++k) out[k] = to_float(values[k]);
    }
}

template <int L, class T> __device__ __forceinline__ void store(T *ptr, const float (&in)[L]) {
    if constexpr (L == 1) {
        __stcg(ptr, from_float<T>(in[0]));
    } else {
        static_assert(L * sizeof(T) % 16 == 0, "vector accesses move whole 16-byte words");
        constexpr int kWords = int(L * sizeof(T) / 16);
        uint4 words[kWords];
        T *values = reinterpret_cast<T *>(words);
#pragma unroll
        for (int k = 0; k < L; ++k) values[k] = from_float<T>(in[k]);
#pragma unroll
        for (int w = 0; w < kWords; ++w) __stcg(reinterpret_cast<uint4 *>(ptr) + w, words[w]);
    }
}

// Elements before ptr reaches a 16-byte boundary; -1 when it never does.
template <class T> __device__ __forceinline__ int align_head(const T *ptr) {
    const auto address = reinterpret_cast<uintptr_t>(ptr);
    if (address % sizeof(T) != 0) return -1;
    return int((16 - address % 16) % 16 / sizeof(T));
}

// True when ptr + head is 16-byte aligned; an absent array (null) never stands in the way.
template <class T> __device__ __forceinline__ bool aligned_at(const T *ptr, int head) {
    return ptr == nullptr || reinterpret_cast<uintptr_t>(ptr + head) % 16 == 0;
}

// Where a chunk of n elements can start vector accesses: the head of `first` (give the array
// of the widest vector step: the bf16/f16 one in mixed precision) when every other array is
// aligned there too, else n (no vector accesses).
template <class First, class... Rest>
__device__ __forceinline__ int vector_head(int n, const First *first, const Rest *...rest) {
    const int head = align_head(first);
    if (head < 0 || !(aligned_at(rest, head) && ...)) return n;
    return head < n ? head : n;
}

template <int N> struct Lanes {
    static constexpr int value = N;
};

// Runs body(Lanes<L>{}, i) for the elements [i, i + L) of a chunk of n, spread over the block:
// L == 1 before `head` and in the tail, L == W (vector accesses) in between.
template <int W, class Body> __device__ __forceinline__ void for_chunk(int n, int head, Body &&body) {
    for (int i = int(threadIdx.x); i < head; i += int(blockDim.x)) body(Lanes<1>{}, i);
    const int vectors = (n - head) / W;
    for (int v = int(threadIdx.x); v < vectors; v += int(blockDim.x)) body(Lanes<W>{}, head + v * W);
    for (int i = head + vectors * W + int(threadIdx.x); i < n; i += int(blockDim.x)) body(Lanes<1>{}, i);
}

// The tensor a block's chunk belongs to, and the chunk.
struct ChunkRef {
    const TensorEntry &tensor;
    Chunk chunk;
};
__device__ __forceinline__ ChunkRef this_chunk(const TensorEntry *tensors, const Chunk *chunks) {
    const Chunk chunk = chunks[blockIdx.x];
    return {tensors[chunk.tensor], chunk};
}

} // namespace shardopt::cuda::detail

// Adam, AdamW and SGD with momentum over 8-bit and 4-bit blockwise-quantized state (the format
// of src/optim/lowbit.hpp); the element arithmetic is src/optim/lowbit_rules.cpp's, operation for
// operation (Adam's denominator multiplies by 1 / sqrt(bias correction 2), as the CPU rule does).
//
// A block of kBlockThreads threads takes groups of kLowbitGroup elements of a quantized tensor (one
// 8-bit quantization block, or two 4-bit ones), one element per thread, with the codebooks loaded
// into shared memory first: 8-bit, groups in turn (its books, with the cell tables, are 26 KiB:
// loaded per group they would cost more traffic than the group's own 16 bytes per element);
// 4-bit, one group (lowbit_blocks). Per group: decode the old moments
// (code value times the block's scale), advance them and move the parameter, reduce the new
// moments' absolute maxima over the quantization block (the new scales, on the float bits as the
// CPU does, a NaN the largest), then encode each moment as its nearest code (lowbit_codes.hpp).
// Slot 0 (m, SGD's momentum) uses the signed maps, slot 1 (v) the unsigned ones.
//
// An entry may be a slice of a bigger tensor (the step engine's shards, LowbitEntry::first): its
// groups count code indices from the tensor's block boundaries, and a block cut by the slice's
// ends whose other parts other ranks hold (LowbitEntry::shared) takes the maximum over every part.
// The maxima pass (kLowbitMaxima) computes the new moments of those blocks' groups and stores
// only their maxima (LowbitEntry::tops); the update then scales each such block by the larger of
// its own maximum and the combined one the host wrote back there. Bytes per f32
// parameter: 8-bit Adam reads p, g (8), m and v codes (2) and their scales (8/256), and writes p,
// m, v codes and scales: about 16.06; 4-bit: about 14.12.
#include <algorithm>

#include "cuda/cuda_check.hpp"
#include "dtype_dispatch.cuh"
#include "launch.hpp"
#include "multi_tensor.cuh"

namespace shardopt::cuda::detail {
namespace {

static_assert(kLowbitGroup == kBlockThreads, "one element per thread");

// Blocks of an 8-bit launch: enough to fill every SM of current GPUs (132-148 SMs, up to 8 blocks
// of 256 threads each), few enough that the 26 KiB books' loads stay a few percent of the groups'
// traffic. 4-bit books are 256 bytes: a block per group, which measured faster (H200, 64M
// parameters: 5.9e10 against 4.8e10 parameters/s capped at 2048 blocks; 8-bit capped with the cell
// tables: 5.1e10, against 4.2e10 with a block per group and a binary search).
constexpr int kLowbitMaxBlocks8 = 2048;

// Blocks of a launch of `groups` groups of `bits`-bit codes.
int lowbit_blocks(int groups, int bits) { return bits == 8 ? std::min(groups, kLowbitMaxBlocks8) : groups; }

template <int Bits> struct SharedBooks;
template <> struct SharedBooks<8> { // 26 KiB: within the 48 KiB of static shared memory a block may have
    float values[kLowbitSlots][256];
    std::uint32_t cells[kLowbitSlots][lowbit::kKeyCells];
    std::uint32_t zero[kLowbitSlots];
    std::uint32_t negative_top[kLowbitSlots];
};
template <> struct SharedBooks<4> {
    float values[kLowbitSlots][16];
    float thresholds[kLowbitSlots][16];
};

template <int Bits> constexpr int kQuantBlock = Bits == 8 ? 256 : 128;

// Every thread of the block calls it; the books are in shared memory when it returns.
template <int Bits, int Slots>
__device__ __forceinline__ void load_books(const LowbitBooks *books, SharedBooks<Bits> &shared) {
    const int i = int(threadIdx.x);
    for (int b = 0; b < Slots; ++b) {
        if constexpr (Bits == 8) {
            for (int j = i; j < 256; j += int(blockDim.x)) shared.values[b][j] = books->values8[b][j];
            for (int j = i; j < lowbit::kKeyCells; j += int(blockDim.x)) shared.cells[b][j] = books->cells8[b][j];
            if (i == 0) {
                shared.zero[b] = books->zero8[b];
                shared.negative_top[b] = books->negative_top8[b];
            }
        } else {
            if (i < 16) shared.values[b][i] = books->values4[b][i];
            if (i < 15) shared.thresholds[b][i] = books->thresholds4[b][i];
        }
    }
    __syncthreads();
}

// The value of element e's code (times the scale by the caller).
template <int Bits>
__device__ __forceinline__ float code_value(const std::uint8_t *codes, int64_t e, const float *values) {
    if constexpr (Bits == 8) {
        return values[codes[e]];
    } else {
        const std::uint8_t byte = codes[e >> 1];
        return values[(e & 1) ? byte >> 4 : byte & 15];
    }
}

// The largest of `bits` over the calling thread's quantization block (8-bit: the whole group;
// 4-bit: threads 0-127 or 128-255). `tops` is this call's own shared array: no barrier follows.
template <int Bits>
__device__ __forceinline__ std::uint32_t block_top(std::uint32_t bits, std::uint32_t (&tops)[kBlockThreads / 32]) {
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
        const std::uint32_t other = __shfl_down_sync(0xffffffffu, bits, offset);
        bits = other > bits ? other : bits;
    }
    const int warp = int(threadIdx.x) / 32;
    if (threadIdx.x % 32 == 0) tops[warp] = bits;
    __syncthreads();
    constexpr int kWarps = kQuantBlock<Bits> / 32;
    const int first = warp / kWarps * kWarps;
    std::uint32_t top = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) top = tops[first + w] > top ? tops[first + w] : top;
    return top;
}

struct Element {
    int64_t e;      // code index (the element's index in its tensor, for a whole tensor)
    int64_t at;     // index in the entry's parameters, gradient and master weights: e - first
    bool active;    // inside the slice
    int count_left; // elements of the group from this one on
};

__device__ __forceinline__ Element this_element(const Chunk &group, const LowbitEntry &q) {
    const int i = int(threadIdx.x);
    const int64_t e = group.offset + i;
    return {e, e - q.first, i < group.count && e >= q.first, group.count - i};
}

// body(q, tensor, element) for each group this block takes (lowbit_blocks: 8-bit several in turn).
// Between two groups every thread has read the first's block maxima (shared memory the next one's
// reductions write): a barrier, uniform over the block, none after its last group.
template <class Body>
__device__ __forceinline__ void for_each_group(const TensorEntry *tensors, const LowbitEntry *entries,
                                               const Chunk *groups, int group_count, Body body) {
    for (int index = int(blockIdx.x); index < group_count; index += int(gridDim.x)) {
        const Chunk group = groups[index];
        const LowbitEntry q = entries[group.tensor];
        body(q, tensors[q.tensor], this_element(group, q));
        if (index + int(gridDim.x) < group_count) __syncthreads();
    }
}

// Slot `slot`'s old value of code index e: its code's value times its block's scale.
template <int Bits>
__device__ __forceinline__ float decoded(const LowbitEntry &q, int slot, int64_t e, const float *values) {
    return code_value<Bits>(q.codes[slot], e, values) * q.scales[slot][e / kQuantBlock<Bits>];
}

// Which end of the slice e's block is, where that block is shared with other ranks: 0 the first
// block, 1 the last, -1 neither (or not shared).
template <int Bits> __device__ __forceinline__ int shared_end(const LowbitEntry &q, int64_t e) {
    const int64_t block = e / kQuantBlock<Bits>;
    if (q.shared[0] && block == 0) return 0;
    if (q.shared[1] && block == (q.end - 1) / kQuantBlock<Bits>) return 1;
    return -1;
}

// The new maximum of x's block (every thread calls it). The maxima pass (`maxima`) stores it for
// a shared block, by the block's first element in the slice, and nothing else. The update takes
// for a shared block the maximum combined across ranks (the larger, as the CPU rule's std::max),
// then stores x's code, and the scale by the block's first element in the slice. Scale 0 (an
// all-zero block) encodes with 1 / scale taken as 0.
template <int Bits, int Slot>
__device__ __forceinline__ void encode_store(float x, const Element &at, bool maxima, const LowbitEntry &q,
                                             const SharedBooks<Bits> &books, std::uint32_t (&tops)[kBlockThreads / 32]) {
    const bool active = at.active;
    const int64_t e = at.e;
    const std::uint32_t top = block_top<Bits>(active ? lowbit_float_bits(x) & 0x7fffffffu : 0u, tops);
    float scale = lowbit_bits_float(top);
    const bool leads = active && (e % kQuantBlock<Bits> == 0 || e == q.first); // the block's first element here
    const int end = shared_end<Bits>(q, e);
    if (maxima) {
        if (leads && end >= 0) q.tops[end * kLowbitSlots + Slot] = scale;
        return;
    }
    if (end >= 0) {
        const float combined = q.tops[end * kLowbitSlots + Slot];
        scale = scale < combined ? combined : scale;
    }
    const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
    const float y = x * inv;
    std::uint8_t *codes = q.codes[Slot];
    if constexpr (Bits == 8) {
        const std::uint8_t code =
            encode8_cells(books.cells[Slot], books.zero[Slot], Slot == 0, books.negative_top[Slot], y);
        if (active) codes[e] = code;
    } else {
        const unsigned code = encode4_search(books.thresholds[Slot], y);
        const unsigned high = __shfl_down_sync(0xffffffffu, code, 1); // the odd neighbour's (same warp)
        if (active && (e & 1) == 0) {
            std::uint8_t &byte = codes[e >> 1];
            // A slice's odd last element has no partner: the high nibble is left as it was.
            byte = at.count_left > 1 ? std::uint8_t(code | high << 4) : std::uint8_t((byte & 0xf0u) | code);
        } else if (active && e == q.first) { // a slice from an odd code: the low nibble is not its own
            std::uint8_t &byte = codes[e >> 1];
            byte = std::uint8_t((byte & 0x0fu) | code << 4);
        }
    }
    if (leads) q.scales[Slot][e / kQuantBlock<Bits>] = scale;
}

template <class P, int Bits>
__global__ void __launch_bounds__(kBlockThreads)
    lowbit_adam_kernel(const TensorEntry *tensors, const LowbitEntry *entries, const Chunk *groups, int group_count,
                       const LowbitBooks *books, const StepScalars *scalars, uint32_t flags) {
    const StepScalars s = *scalars;
    if (s.skip) return;
    constexpr bool kMixed = sizeof(P) != sizeof(float);
    const bool decay = flags & kWeightDecay;
    const bool l2 = decay && !(flags & kDecoupled), decoupled = decay && (flags & kDecoupled);
    __shared__ SharedBooks<Bits> book;
    __shared__ std::uint32_t tops[2][kBlockThreads / 32];
    load_books<Bits, 2>(books, book);
    const bool maxima = flags & kLowbitMaxima; // the new moments' maxima only: nothing written

    for_each_group(tensors, entries, groups, group_count, [&](const LowbitEntry &q, const TensorEntry &tensor,
                                                             const Element &at) {
        const int64_t e = at.e;
        float m_i = 0.0f, v_i = 0.0f;
        if (at.active) {
            const P *grad = static_cast<const P *>(tensor.grad);
            float p = __ldcg(tensor.master + at.at);
            if (decoupled) p *= s.decay_factor;
            float g = s.sign * (to_float(__ldcg(grad + at.at)) * s.grad_scale);
            if (l2) g += s.weight_decay * p;
            const float m_old = decoded<Bits>(q, 0, e, book.values[0]);
            const float v_old = decoded<Bits>(q, 1, e, book.values[1]);
            m_i = m_old + s.one_minus_beta1 * (g - m_old);
            v_i = v_old * s.beta2 + s.one_minus_beta2 * g * g;
            if (!maxima) {
                const float denom = sqrtf(v_i) * s.inv_bias_correction2_sqrt + s.eps;
                p = p - s.step_size * m_i / denom;
                __stcg(tensor.master + at.at, p);
                if constexpr (kMixed) __stcg(static_cast<P *>(tensor.param) + at.at, from_float<P>(p));
            }
        }
        encode_store<Bits, 0>(m_i, at, maxima, q, book, tops[0]);
        encode_store<Bits, 1>(v_i, at, maxima, q, book, tops[1]);
    });
}

template <class P, int Bits>
__global__ void __launch_bounds__(kBlockThreads)
    lowbit_sgd_kernel(const TensorEntry *tensors, const LowbitEntry *entries, const Chunk *groups, int group_count,
                      const LowbitBooks *books, const StepScalars *scalars, uint32_t flags) {
    const StepScalars s = *scalars;
    if (s.skip) return;
    constexpr bool kMixed = sizeof(P) != sizeof(float);
    const bool decay = flags & kWeightDecay, nesterov = flags & kNesterov;
    const bool first = s.first_step != 0; // the buffer starts at the gradient itself
    __shared__ SharedBooks<Bits> book;
    __shared__ std::uint32_t tops[kBlockThreads / 32];
    load_books<Bits, 1>(books, book);
    const bool maxima = flags & kLowbitMaxima; // the new buffer's maxima only: nothing written

    for_each_group(tensors, entries, groups, group_count, [&](const LowbitEntry &q, const TensorEntry &tensor,
                                                             const Element &at) {
        float b = 0.0f;
        if (at.active) {
            const P *grad = static_cast<const P *>(tensor.grad);
            float p = __ldcg(tensor.master + at.at);
            float g = s.sign * (to_float(__ldcg(grad + at.at)) * s.grad_scale);
            if (decay) g += s.weight_decay * p;
            if (first)
                b = g;
            else
                b = decoded<Bits>(q, 0, at.e, book.values[0]) * s.momentum + s.one_minus_dampening * g;
            if (!maxima) {
                const float direction = nesterov ? g + s.momentum * b : b;
                p -= s.lr * direction;
                __stcg(tensor.master + at.at, p);
                if constexpr (kMixed) __stcg(static_cast<P *>(tensor.param) + at.at, from_float<P>(p));
            }
        }
        encode_store<Bits, 0>(b, at, maxima, q, book, tops);
    });
}

// launch_<name> and preload_<name> of a low-bit kernel template kernel<P, Bits>.
#define SHARDOPT_LOWBIT_ENTRY_POINTS(name, kernel)                                                            \
    void launch_##name(const LowbitLaunch &launch) {                                                           \
        if (launch.group_count == 0) return;                                                                   \
        with_param_type(launch.dtype, [&](auto *tag) {                                                         \
            using P = std::remove_pointer_t<decltype(tag)>;                                                    \
            auto run = [&](auto *k) {                                                                          \
                SHARDOPT_LAUNCH(k, lowbit_blocks(launch.group_count, launch.bits), kBlockThreads, 0,            \
                                launch.stream)(launch.tensors, launch.entries, launch.groups, launch.group_count,     \
                                               launch.books, launch.scalars, launch.flags);                           \
            };                                                                                                 \
            if (launch.bits == 8) run(kernel<P, 8>);                                                           \
            else run(kernel<P, 4>);                                                                            \
        });                                                                                                    \
        check_launch(#kernel);                                                                                 \
    }                                                                                                          \
    void preload_##name(DType dtype, int bits) {                                                               \
        with_param_type(dtype, [&](auto *tag) {                                                                \
            using P = std::remove_pointer_t<decltype(tag)>;                                                    \
            cudaFuncAttributes attributes{};                                                                   \
            check(cudaFuncGetAttributes(&attributes, bits == 8 ? kernel<P, 8> : kernel<P, 4>),                 \
                  "loading " #kernel);                                                                         \
        });                                                                                                    \
    }

} // namespace

SHARDOPT_LOWBIT_ENTRY_POINTS(lowbit_adam, lowbit_adam_kernel)
SHARDOPT_LOWBIT_ENTRY_POINTS(lowbit_sgd, lowbit_sgd_kernel)

} // namespace shardopt::cuda::detail

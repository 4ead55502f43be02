// The frame every element-wise rule kernel shares (sgd, adam, rmsprop, adagrad, lion, adamax,
// adadelta .cu): this step's scalars (nothing happens on a skipped step), the block's chunk, the
// gradient, master weights, state slots and (bf16/f16) parameters at the chunk's offset, vector
// accesses wherever all of them allow (multi_tensor.cuh), and per element the rule's arithmetic:
//
//   element(float &p, float g, float (&state)[S], const StepScalars &s)
//
// p: the fp32 master weight (updated in place), g: the raw gradient as stored (the rule applies
// s.sign and s.grad_scale itself), state: the element's S state values (updated in place). The
// master weights, state and, in mixed precision, the rounded parameters are written back.
#pragma once

#include <cstdint>
#include <utility>

#include "multi_tensor.cuh"
#include "step_control.hpp"
#include "tensor_table.hpp"

namespace shardopt::cuda::detail {

// Which of a rule's S state values (bit j: value j) a launch has: those present take
// TensorEntry::state slots in order (RMSprop: square_avg, then the momentum buffer when
// momentum > 0, then grad_avg when centered). `unread_on_first_step`: present values that
// start from nothing on the first step (s.first_step): not read then, 0 for the rule, which
// writes them (SGD's momentum buffer starts at the gradient). Absent values are 0 and not
// written.
struct StateSlots {
    uint32_t present = 0;
    uint32_t unread_on_first_step = 0;
};

template <int S, class P, size_t... J>
__device__ __forceinline__ int rule_vector_head(int n, const P *grad, const P *param, const float *master,
                                                float *const (&state)[S], std::index_sequence<J...>) {
    return vector_head(n, grad, param, master, static_cast<const float *>(state[J])...);
}

template <class P, int S, class Element>
__device__ __forceinline__ void rule_frame(const TensorEntry *tensors, const Chunk *chunks,
                                           const StepScalars *scalars, StateSlots slots, Element element) {
    static_assert(S >= 1 && S <= kMaxStateSlots, "a rule has 1 to kMaxStateSlots state values");
    const StepScalars s = *scalars;
    if (s.skip) return;
    constexpr bool kMixed = sizeof(P) != sizeof(float);
    const uint32_t read = s.first_step ? slots.present & ~slots.unread_on_first_step : slots.present;

    const ChunkRef ref = this_chunk(tensors, chunks);
    const int64_t offset = ref.chunk.offset;
    const int n = ref.chunk.count;
    const P *grad = static_cast<const P *>(ref.tensor.grad) + offset;
    P *param = static_cast<P *>(ref.tensor.param) + offset;
    float *master = ref.tensor.master + offset;
    float *state[S];
    int slot = 0;
#pragma unroll
    for (int j = 0; j < S; ++j) state[j] = slots.present & (1u << j) ? ref.tensor.state[slot++] + offset : nullptr;

    const int head =
        rule_vector_head<S>(n, grad, kMixed ? param : nullptr, master, state, std::make_index_sequence<S>{});
    for_chunk<kVectorWidth<P>>(n, head, [&](auto lanes, int i) {
        constexpr int L = decltype(lanes)::value;
        float g[L], p[L], values[S][L] = {};
        load<L>(grad + i, g);
        load<L>(master + i, p);
#pragma unroll
        for (int j = 0; j < S; ++j)
            if (read & (1u << j)) load<L>(state[j] + i, values[j]);
#pragma unroll
        for (int k = 0; k < L; ++k) {
            float value[S];
#pragma unroll
            for (int j = 0; j < S; ++j) value[j] = values[j][k];
            element(p[k], g[k], value, s);
#pragma unroll
            for (int j = 0; j < S; ++j) values[j][k] = value[j];
        }
#pragma unroll
        for (int j = 0; j < S; ++j)
            if (slots.present & (1u << j)) store<L>(state[j] + i, values[j]);
        store<L>(master + i, p);
        if constexpr (kMixed) store<L>(param + i, p);
    });
}

} // namespace shardopt::cuda::detail

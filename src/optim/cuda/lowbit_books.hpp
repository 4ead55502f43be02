// Host side: the codebooks of lowbit.hpp laid out as the low-bit kernels read them
// (LowbitBooks): the same values, cells and thresholds.
#pragma once

#include "../lowbit.hpp"
#include "lowbit_codes.hpp"

namespace shardopt::cuda::detail {

inline LowbitBooks make_lowbit_books() {
    LowbitBooks books{};
    const lowbit::Codebook8 *eight[kLowbitSlots] = {&lowbit::signed8(), &lowbit::unsigned8()};
    const lowbit::Codebook4 *four[kLowbitSlots] = {&lowbit::signed4(), &lowbit::unsigned4()};
    for (int b = 0; b < kLowbitSlots; ++b) {
        const float *v = eight[b]->values;
        const int zero = eight[b]->zero;
        for (int c = 0; c < 256; ++c) books.values8[b][c] = v[c];
        books.zero8[b] = std::uint32_t(zero);
        books.negative_top8[b] = eight[b]->negative_top;
        for (int c = 0; c < lowbit::kKeyCells; ++c) books.cells8[b][c] = eight[b]->cells[c];
        for (int c = 0; c < 16; ++c) books.values4[b][c] = four[b]->values[c];
        for (int i = 0; i < 15; ++i) books.thresholds4[b][i] = four[b]->thresholds[i];
    }
    return books;
}

} // namespace shardopt::cuda::detail

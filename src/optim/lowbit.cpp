#include "lowbit.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "shardopt/error.hpp"

namespace shardopt::lowbit {
namespace {

float from_bits(std::uint32_t b) {
    float x;
    std::memcpy(&x, &b, sizeof x);
    return x;
}

// The cells over the codes first .. 255 (values ascending, values[first] == 0): cell c covers
// the floats whose bits >> kKeyShift are kKeyBase + c; its entry is the code nearest its low end
// and the one threshold inside it, if any. Refuses (internal) a cell holding two thresholds.
void build_cells(Codebook8 &book, int first) {
    const float *v = book.values;
    for (int c = 0; c < kKeyCells; ++c) {
        const std::uint32_t low = (kKeyBase + std::uint32_t(c)) << kKeyShift;
        const std::uint32_t high = low | kKeyLowMask; // the cell's last float
        const float x = from_bits(low);
        int code = first; // codes whose threshold below is < x: the nearest of the cell's low end
        while (code < 255 && x > (v[code] + v[code + 1]) / 2.0f) ++code;
        std::uint32_t threshold_low = kKeyLowMask;
        int inside = 0;
        for (int k = code; k < 255; ++k) {
            const float t = (v[k] + v[k + 1]) / 2.0f;
            const std::uint32_t tb = float_bits(t);
            if (tb < low || tb > high) continue;
            if (tb == high) continue; // x > t never holds inside the cell: no step
            threshold_low = tb & kKeyLowMask;
            ++inside;
        }
        require(inside <= 1, ErrorCode::internal,
                "low-bit codebook: a table cell holds " + std::to_string(inside) + " thresholds");
        book.cells[c] = std::uint32_t(code) << 24 | threshold_low;
    }
}

Codebook8 make_book8(const float *values, bool is_signed) {
    Codebook8 book{};
    book.values = values;
    book.is_signed = is_signed;
    book.zero = is_signed ? 127 : 0;
    require(values[book.zero] == 0.0f && values[255] == 1.0f, ErrorCode::internal, "low-bit codebook: bad 8-bit map");
    if (is_signed) {
        for (int j = 0; j < 126; ++j)
            require(values[126 - j] == -values[128 + j], ErrorCode::internal,
                    "low-bit codebook: the signed 8-bit map is not mirrored");
        require(values[0] == -1.0f, ErrorCode::internal, "low-bit codebook: the signed 8-bit map does not reach -1");
        book.negative_top = float_bits((values[0] + values[1]) / 2.0f) & 0x7fffffffu;
    }
    // Below 2^-23 everything is the zero code: no threshold may lie there.
    require((values[book.zero] + values[book.zero + 1]) / 2.0f >= from_bits(kKeyFirstBits), ErrorCode::internal,
            "low-bit codebook: a threshold below the table's range");
    build_cells(book, book.zero);
    return book;
}

Codebook4 make_book4(const float *values) {
    Codebook4 book{};
    book.values = values;
    for (int i = 0; i < 15; ++i) book.thresholds[i] = (values[i] + values[i + 1]) / 2.0f;
    for (int b = 0; b < 256; ++b) {
        book.pairs[b][0] = values[b & 15];
        book.pairs[b][1] = values[b >> 4];
    }
    return book;
}

} // namespace

std::vector<std::size_t> shared_blocks(std::size_t block, const std::vector<std::size_t> &cuts) {
    std::vector<std::size_t> blocks;
    for (const std::size_t c : cuts)
        if (block > 0 && c % block != 0) blocks.push_back(c / block);
    std::sort(blocks.begin(), blocks.end());
    blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
    return blocks;
}

SharedEnds shared_ends(std::size_t block, const std::vector<std::size_t> &shared, std::size_t offset,
                       std::size_t count, std::size_t tensor_count) {
    constexpr std::size_t npos = Segment<float>::npos;
    SharedEnds ends{npos, npos};
    if (block == 0 || count == 0) return ends;
    auto index_of = [&](std::size_t b) {
        const auto it = std::lower_bound(shared.begin(), shared.end(), b);
        return it != shared.end() && *it == b ? std::size_t(it - shared.begin()) : npos;
    };
    const std::size_t end = offset + count;
    // A block is shared when the slice does not hold all of it.
    auto partial = [&](std::size_t b) { return b * block < offset || std::min((b + 1) * block, tensor_count) > end; };
    const std::size_t first = offset / block, last = (end - 1) / block;
    if (partial(first)) ends.first = index_of(first);
    if (partial(last)) ends.last = index_of(last);
    return ends;
}

std::size_t blocks_touched(StatePrecision p, std::size_t offset, std::size_t count) {
    const std::size_t b = block_elements(p);
    if (b == 0 || count == 0) return 0;
    return (offset + count + b - 1) / b - offset / b;
}

std::size_t code_bytes(StatePrecision p, std::size_t offset, std::size_t count) {
    const std::size_t b = block_elements(p);
    if (b == 0 || count == 0) return 0;
    const std::size_t codes = offset % b + count;
    return code_bits(p) == 8 ? codes : (codes + 1) / 2;
}

const Codebook8 &signed8() {
    static const Codebook8 book = make_book8(codebooks::kSigned8, true);
    return book;
}
const Codebook8 &unsigned8() {
    static const Codebook8 book = make_book8(codebooks::kUnsigned8, false);
    return book;
}
const Codebook4 &signed4() {
    static const Codebook4 book = make_book4(codebooks::kSigned4);
    return book;
}
const Codebook4 &unsigned4() {
    static const Codebook4 book = make_book4(codebooks::kUnsigned4);
    return book;
}

namespace {

std::uint8_t code_at(const LowBitArray &a, StatePrecision p, std::size_t n) {
    if (p == StatePrecision::bits8) return a.codes[n];
    return std::uint8_t(n & 1 ? a.codes[n >> 1] >> 4 : a.codes[n >> 1] & 15);
}
void set_code(const LowBitArray &a, StatePrecision p, std::size_t n, std::uint8_t code) {
    if (p == StatePrecision::bits8) {
        a.codes[n] = code;
        return;
    }
    std::uint8_t &byte = a.codes[n >> 1];
    byte = std::uint8_t(n & 1 ? (byte & 0x0f) | code << 4 : (byte & 0xf0) | code);
}
const float *values_of(StatePrecision p, bool is_signed) {
    if (p == StatePrecision::bits8) return (is_signed ? signed8() : unsigned8()).values;
    return (is_signed ? signed4() : unsigned4()).values;
}

} // namespace

template <typename T>
void decode_slice(const LowBitArray &a, StatePrecision p, bool is_signed, std::size_t offset, std::size_t count,
                  T *out) {
    const std::size_t block = block_elements(p), head = offset % block;
    const float *values = values_of(p, is_signed);
    for (std::size_t i = 0; i < count; ++i) {
        const std::size_t n = head + i;
        out[i] = T(values[code_at(a, p, n)]) * T(a.scales[n / block]);
    }
}

template <typename T>
void encode_slice(const LowBitArray &a, StatePrecision p, bool is_signed, std::size_t offset, std::size_t count,
                  const T *values, double first_top, double last_top) {
    const std::size_t block = block_elements(p), head = offset % block;
    const std::size_t blocks = blocks_touched(p, offset, count);
    const Codebook8 *book8 = p == StatePrecision::bits8 ? &(is_signed ? signed8() : unsigned8()) : nullptr;
    const Codebook4 *book4 = book8 ? nullptr : &(is_signed ? signed4() : unsigned4());
    for (std::size_t b = 0; b < blocks; ++b) {
        const std::size_t code = b == 0 ? head : b * block, first = code - head;
        const std::size_t n = std::min(count - first, (b + 1) * block - code);
        T top = 0;
        for (std::size_t k = 0; k < n; ++k) top = std::max(top, T(std::fabs(values[first + k])));
        if (b == 0 && first_top >= 0.0) top = std::max(top, T(first_top));
        if (b + 1 == blocks && last_top >= 0.0) top = std::max(top, T(last_top));
        const float scale = float(top);
        const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
        for (std::size_t k = 0; k < n; ++k) {
            const float y = float(values[first + k]) * inv;
            set_code(a, p, code + k, book8 ? encode8(*book8, y) : encode4(*book4, y));
        }
        a.scales[b] = scale;
    }
}

template <typename T> double head_top(StatePrecision p, std::size_t offset, std::size_t count, const T *values) {
    const std::size_t block = block_elements(p);
    const std::size_t n = std::min(count, block - offset % block);
    double top = 0.0;
    for (std::size_t k = 0; k < n; ++k) top = std::max(top, double(std::fabs(values[k])));
    return top;
}

template <typename T> double tail_top(StatePrecision p, std::size_t offset, std::size_t count, const T *values) {
    const std::size_t block = block_elements(p), end = offset + count;
    const std::size_t n = std::min(count, end - (end - 1) / block * block);
    double top = 0.0;
    for (std::size_t k = count - n; k < count; ++k) top = std::max(top, double(std::fabs(values[k])));
    return top;
}

template void decode_slice(const LowBitArray &, StatePrecision, bool, std::size_t, std::size_t, float *);
template void decode_slice(const LowBitArray &, StatePrecision, bool, std::size_t, std::size_t, double *);
template void encode_slice(const LowBitArray &, StatePrecision, bool, std::size_t, std::size_t, const float *, double,
                           double);
template void encode_slice(const LowBitArray &, StatePrecision, bool, std::size_t, std::size_t, const double *, double,
                           double);
template double head_top(StatePrecision, std::size_t, std::size_t, const float *);
template double head_top(StatePrecision, std::size_t, std::size_t, const double *);
template double tail_top(StatePrecision, std::size_t, std::size_t, const float *);
template double tail_top(StatePrecision, std::size_t, std::size_t, const double *);

} // namespace shardopt::lowbit

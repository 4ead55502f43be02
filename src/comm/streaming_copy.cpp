#include "streaming_copy.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <emmintrin.h>
#define SHARDOPT_STREAMING_STORES 1
#endif

namespace shardopt {

void streaming_copy(void *dst, const void *src, std::size_t bytes) {
#if SHARDOPT_STREAMING_STORES
    auto *d = static_cast<unsigned char *>(dst);
    const auto *s = static_cast<const unsigned char *>(src);
    // Ordinary stores up to dst's first cache-line boundary, then whole lines (a streamed line
    // left partly written costs a read-modify-write in memory), the tail ordinary again.
    const std::size_t head = std::min(bytes, (64 - (reinterpret_cast<std::uintptr_t>(d) & 63)) & 63);
    std::memcpy(d, s, head);
    d += head, s += head, bytes -= head;
    for (; bytes >= 64; d += 64, s += 64, bytes -= 64) {
        const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s));
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s + 16));
        const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s + 32));
        const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s + 48));
        _mm_stream_si128(reinterpret_cast<__m128i *>(d), a);
        _mm_stream_si128(reinterpret_cast<__m128i *>(d + 16), b);
        _mm_stream_si128(reinterpret_cast<__m128i *>(d + 32), c);
        _mm_stream_si128(reinterpret_cast<__m128i *>(d + 48), e);
    }
    std::memcpy(d, s, bytes);
#else
    std::memcpy(dst, src, bytes);
#endif
}

void streaming_fence() {
#if SHARDOPT_STREAMING_STORES
    _mm_sfence();
#endif
}

} // namespace shardopt

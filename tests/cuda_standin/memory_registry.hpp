// The stand-in's memory: device and pinned allocations are ordinary host memory, remembered by
// range, so a copy can tell which side a pointer is on (as CUDA's unified addressing does), a
// wrong direction or a pointer outside any allocation is refused, and pageable memory (what
// no allocation covers) gets CUDA's pageable-copy semantics. Fresh device memory is filled with
// 0xff bytes (NaN in every float type, -1 in the integers) so a read of memory no one wrote
// shows in the results instead of passing as zeros.
#pragma once

#include <cstddef>

namespace cuda_standin {

enum class MemoryKind { pageable, pinned, device };

void *allocate(std::size_t bytes, MemoryKind kind);
// False when `ptr` is not the start of a live allocation of that kind.
bool release(void *ptr, MemoryKind kind);

// What `ptr` points into; pageable for any pointer outside the stand-in's allocations.
MemoryKind kind_of(const void *ptr);
// True when [ptr, ptr + bytes) lies inside one allocation of `kind` (any pointer is pageable).
bool covers(const void *ptr, std::size_t bytes, MemoryKind kind);

} // namespace cuda_standin

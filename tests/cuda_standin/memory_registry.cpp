#include "memory_registry.hpp"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>

namespace cuda_standin {
namespace {

struct Allocation {
    std::size_t bytes;
    MemoryKind kind;
};

struct Registry {
    std::mutex mutex;
    std::map<std::uintptr_t, Allocation> allocations; // by start address
};

Registry &registry() {
    static Registry *r = new Registry(); // never destroyed: worker threads may outlive main
    return *r;
}

// The allocation containing ptr, or null (registry mutex held).
const std::pair<const std::uintptr_t, Allocation> *find(const void *ptr) {
    auto &all = registry().allocations;
    const auto address = reinterpret_cast<std::uintptr_t>(ptr);
    auto it = all.upper_bound(address);
    if (it == all.begin()) return nullptr;
    --it;
    // A zero-byte allocation still owns its first byte (CUDA hands out distinct pointers).
    const std::size_t span = it->second.bytes ? it->second.bytes : 1;
    return address < it->first + span ? &*it : nullptr;
}

} // namespace

void *allocate(std::size_t bytes, MemoryKind kind) {
    // 256-byte alignment, as cudaMalloc guarantees (the kernels' vector paths depend on it).
    void *ptr = std::aligned_alloc(256, (bytes + 255) / 256 * 256 + 256);
    if (!ptr) return nullptr;
    if (kind == MemoryKind::device) std::memset(ptr, 0xff, bytes);
    std::lock_guard<std::mutex> lock(registry().mutex);
    registry().allocations[reinterpret_cast<std::uintptr_t>(ptr)] = Allocation{bytes, kind};
    return ptr;
}

bool release(void *ptr, MemoryKind kind) {
    {
        std::lock_guard<std::mutex> lock(registry().mutex);
        auto &all = registry().allocations;
        auto it = all.find(reinterpret_cast<std::uintptr_t>(ptr));
        if (it == all.end() || it->second.kind != kind) return false;
        all.erase(it);
    }
    std::free(ptr);
    return true;
}

MemoryKind kind_of(const void *ptr) {
    std::lock_guard<std::mutex> lock(registry().mutex);
    const auto *a = find(ptr);
    return a ? a->second.kind : MemoryKind::pageable;
}

bool covers(const void *ptr, std::size_t bytes, MemoryKind kind) {
    std::lock_guard<std::mutex> lock(registry().mutex);
    const auto *a = find(ptr);
    if (!a) return kind == MemoryKind::pageable;
    const auto address = reinterpret_cast<std::uintptr_t>(ptr);
    return a->second.kind == kind && address + bytes <= a->first + a->second.bytes;
}

} // namespace cuda_standin

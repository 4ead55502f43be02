// The bytes a reducer's error-feedback state is saved as (checkpoints): a small header naming
// the method, the element size and each array's length, then the arrays' raw elements.
#pragma once

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "shardopt/compression.hpp"

namespace shardopt::compression::residual_state {

inline constexpr std::uint32_t kMagic = 0x52455344; // "RESD"

template <typename T>
std::vector<unsigned char> save(GradientCompression method, std::initializer_list<const std::vector<T> *> arrays) {
    std::vector<std::uint64_t> header = {kMagic, std::uint64_t(method), sizeof(T), arrays.size()};
    for (const auto *a : arrays) header.push_back(a->size());
    std::size_t bytes = header.size() * 8;
    for (const auto *a : arrays) bytes += a->size() * sizeof(T);
    std::vector<unsigned char> out(bytes);
    std::memcpy(out.data(), header.data(), header.size() * 8);
    std::size_t at = header.size() * 8;
    for (const auto *a : arrays) {
        if (!a->empty()) std::memcpy(out.data() + at, a->data(), a->size() * sizeof(T));
        at += a->size() * sizeof(T);
    }
    return out;
}

// False, changing nothing, unless the bytes hold arrays of exactly these lengths.
template <typename T>
bool load(const std::vector<unsigned char> &in, GradientCompression method, std::initializer_list<std::vector<T> *> arrays) {
    const std::size_t head = (4 + arrays.size()) * 8;
    if (in.size() < head) return false;
    std::vector<std::uint64_t> header(4 + arrays.size());
    std::memcpy(header.data(), in.data(), head);
    if (header[0] != kMagic || header[1] != std::uint64_t(method) || header[2] != sizeof(T) || header[3] != arrays.size())
        return false;
    std::size_t bytes = head, i = 4;
    for (const auto *a : arrays) {
        if (header[i++] != a->size()) return false;
        bytes += a->size() * sizeof(T);
    }
    if (bytes != in.size()) return false;
    std::size_t at = head;
    for (auto *a : arrays) {
        if (!a->empty()) std::memcpy(a->data(), in.data() + at, a->size() * sizeof(T));
        at += a->size() * sizeof(T);
    }
    return true;
}

} // namespace shardopt::compression::residual_state

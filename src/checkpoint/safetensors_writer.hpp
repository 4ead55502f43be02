// Writes parameters in the safetensors format (https://github.com/huggingface/safetensors):
// 8-byte little-endian header length N, N bytes of JSON header ({"name": {"dtype": "F32",
// "shape": [count], "data_offsets": [begin, end]}, ..., "__metadata__": {...}}, padded with
// spaces to a multiple of 8), then the raw little-endian data. Tensors are 1-D (the library
// knows element counts, not shapes).
#pragma once

#include <map>
#include <string>

#include "byte_io.hpp"
#include "manifest.hpp"

namespace shardopt::checkpoint {

// What precedes the data: the 8-byte length and the JSON header (tensors back to back in layout
// order, so the data area is the packed tensors).
std::string safetensors_head(const LayoutInfo &layout, const std::map<std::string, std::string> &metadata);
// `packed`: the tensors' elements back to back in layout order.
void write_safetensors(ByteSink &sink, const LayoutInfo &layout, const void *packed,
                       const std::map<std::string, std::string> &metadata);

} // namespace shardopt::checkpoint

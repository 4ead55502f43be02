#include "safetensors_writer.hpp"

#include <nlohmann/json.hpp>

#include "shardopt/error.hpp"

namespace shardopt::checkpoint {

namespace {
const char *safetensors_dtype(DType d) {
    switch (d) {
    case DType::f32: return "F32";
    case DType::f64: return "F64";
    case DType::f16: return "F16";
    case DType::bf16: return "BF16";
    case DType::i32: return "I32";
    case DType::i64: return "I64";
    case DType::u8: return "U8";
    }
    throw Error(ErrorCode::invalid_argument, "no safetensors dtype for this parameter dtype");
}
} // namespace

std::string safetensors_head(const LayoutInfo &layout, const std::map<std::string, std::string> &metadata) {
    const std::size_t elem = dtype_size(layout.dtype);
    nlohmann::json header = nlohmann::json::object();
    std::uint64_t offset = 0;
    for (const auto &t : layout.tensors) {
        const std::uint64_t bytes = t.count * elem;
        header[t.name] = {{"dtype", safetensors_dtype(layout.dtype)},
                          {"shape", {t.count}},
                          {"data_offsets", {offset, offset + bytes}}};
        offset += bytes;
    }
    if (!metadata.empty()) header["__metadata__"] = metadata;
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    std::string out(8, '\0');
    put_u64(reinterpret_cast<unsigned char *>(out.data()), text.size());
    return out + text;
}

void write_safetensors(ByteSink &sink, const LayoutInfo &layout, const void *packed,
                       const std::map<std::string, std::string> &metadata) {
    const std::string head = safetensors_head(layout, metadata);
    std::uint64_t bytes = 0;
    for (const auto &t : layout.tensors) bytes += t.count * dtype_size(layout.dtype);
    sink.write(head.data(), head.size());
    sink.write(packed, std::size_t(bytes));
}

} // namespace shardopt::checkpoint

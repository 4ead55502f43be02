#include "manifest.hpp"

#include <cstdio>

#include "shardopt/error.hpp"

namespace shardopt::checkpoint {

namespace {

[[noreturn]] void corrupt(const std::string &source, const std::string &what) {
    throw Error(ErrorCode::corrupt, source + ": " + what);
}

const nlohmann::json &field(const nlohmann::json &j, const char *key, const std::string &source) {
    const auto it = j.find(key);
    if (it == j.end()) corrupt(source, std::string("header field '") + key + "' is missing");
    return *it;
}

std::uint64_t uint_field(const nlohmann::json &j, const char *key, const std::string &source, std::uint64_t max) {
    const auto &v = field(j, key, source);
    if (!v.is_number_unsigned() || v.get<std::uint64_t>() > max)
        corrupt(source, std::string("header field '") + key + "' is not an integer in [0, " + std::to_string(max) + "]");
    return v.get<std::uint64_t>();
}

std::string string_field(const nlohmann::json &j, const char *key, const std::string &source) {
    const auto &v = field(j, key, source);
    if (!v.is_string()) corrupt(source, std::string("header field '") + key + "' is not a string");
    return v.get<std::string>();
}

bool parse_dtype(const std::string &s, DType &out) {
    for (int d = 0; d < kDTypeCount; ++d)
        if (s == dtype_name(DType(d))) {
            out = DType(d);
            return true;
        }
    return false;
}

} // namespace

nlohmann::json layout_to_json(const LayoutInfo &layout) {
    nlohmann::json tensors = nlohmann::json::array();
    for (const auto &t : layout.tensors) tensors.push_back({{"name", t.name}, {"count", t.count}});
    return {{"dtype", dtype_name(layout.dtype)}, {"tensors", tensors}};
}

LayoutInfo layout_from_json(const nlohmann::json &j, const std::string &source) {
    if (!j.is_object()) corrupt(source, "header field 'layout' is not an object");
    LayoutInfo layout;
    if (!parse_dtype(string_field(j, "dtype", source), layout.dtype))
        corrupt(source, "unknown layout dtype '" + j["dtype"].get<std::string>() + "'");
    const auto &tensors = field(j, "tensors", source);
    if (!tensors.is_array()) corrupt(source, "header field 'tensors' is not an array");
    for (const auto &t : tensors) {
        if (!t.is_object()) corrupt(source, "a layout tensor entry is not an object");
        TensorInfo info;
        info.name = string_field(t, "name", source);
        info.count = uint_field(t, "count", source, std::uint64_t(1) << 48);
        layout.tensors.push_back(std::move(info));
    }
    return layout;
}

nlohmann::json manifest_to_json(const Manifest &m) {
    nlohmann::json j = {{"format", kFormatName},
                        {"kind", m.kind},
                        {"layout", layout_to_json(m.layout)},
                        {"generation", m.generation},
                        {"world_size", m.world_size},
                        {"step_count", m.step_count},
                        {"state_slots", m.state_slots},
                        {"optimizer_kind", m.optimizer_kind},
                        {"lr", m.lr},
                        {"optimizer", m.optimizer},
                        {"sharding", m.sharding}};
    if (m.kind == "sharded-manifest") {
        nlohmann::json files = nlohmann::json::array();
        for (const auto &f : m.files) {
            char hex[17];
            std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(f.header_xxh3));
            files.push_back({{"name", f.name}, {"rank", f.rank}, {"bytes", f.bytes}, {"header_xxh3", hex}});
        }
        j["files"] = files;
    }
    return j;
}

Manifest manifest_from_json(const nlohmann::json &h, const std::string &source) {
    Manifest m;
    if (string_field(h, "format", source) != kFormatName) corrupt(source, "header field 'format' is not 'shardopt-checkpoint'");
    m.kind = string_field(h, "kind", source);
    if (m.kind == "shard")
        throw Error(ErrorCode::invalid_argument, source + ": this is one rank's shard file; load the checkpoint's manifest (" +
                                                     kManifestFile + ") or its directory instead");
    if (m.kind != "sharded-manifest" && m.kind != "consolidated") corrupt(source, "unknown checkpoint kind '" + m.kind + "'");
    m.layout = layout_from_json(field(h, "layout", source), source);
    m.generation = string_field(h, "generation", source);
    m.world_size = int(uint_field(h, "world_size", source, 1u << 24));
    if (m.world_size < 1) corrupt(source, "world_size must be at least 1");
    m.step_count = std::int64_t(uint_field(h, "step_count", source, std::uint64_t(1) << 62));
    m.state_slots = int(uint_field(h, "state_slots", source, 16));
    m.optimizer_kind = int(uint_field(h, "optimizer_kind", source, 1000));
    const auto &lr = field(h, "lr", source);
    if (!lr.is_number()) corrupt(source, "header field 'lr' is not a number");
    m.lr = lr.get<double>();
    m.optimizer = field(h, "optimizer", source);
    m.sharding = field(h, "sharding", source);
    if (m.kind == "sharded-manifest") {
        const auto &files = field(h, "files", source);
        if (!files.is_array()) corrupt(source, "header field 'files' is not an array");
        if (files.size() != std::size_t(m.world_size))
            corrupt(source, "lists " + std::to_string(files.size()) + " shard files for a world of " +
                                std::to_string(m.world_size));
        for (const auto &f : files) {
            if (!f.is_object()) corrupt(source, "a 'files' entry is not an object");
            ShardFileInfo info;
            info.name = string_field(f, "name", source);
            if (!is_shard_file_name(info.name)) corrupt(source, "shard file name '" + info.name + "' is not valid");
            info.rank = int(uint_field(f, "rank", source, 1u << 24));
            info.bytes = uint_field(f, "bytes", source, ~std::uint64_t(0));
            const std::string hex = string_field(f, "header_xxh3", source);
            if (hex.size() != 16 || hex.find_first_not_of("0123456789abcdef") != std::string::npos)
                corrupt(source, "shard header checksum '" + hex + "' is not 16 hex digits");
            info.header_xxh3 = std::stoull(hex, nullptr, 16);
            m.files.push_back(std::move(info));
        }
    }
    return m;
}

void check_same_layout(const LayoutInfo &ckpt, const LayoutInfo &model) {
    const std::string prefix = "checkpoint does not match the model's parameter layout: ";
    if (ckpt.dtype != model.dtype)
        throw Error(ErrorCode::invalid_argument, prefix + "dtype is " + dtype_name(ckpt.dtype) + " in the checkpoint but " +
                                                     dtype_name(model.dtype) + " in the model");
    const std::size_t n = std::min(ckpt.tensors.size(), model.tensors.size());
    for (std::size_t i = 0; i < n; ++i) {
        const auto &a = ckpt.tensors[i], &b = model.tensors[i];
        if (a.name != b.name || a.count != b.count)
            throw Error(ErrorCode::invalid_argument, prefix + "tensor " + std::to_string(i) + " is '" + a.name + "' (" +
                                                         std::to_string(a.count) + " elements) in the checkpoint but '" +
                                                         b.name + "' (" + std::to_string(b.count) +
                                                         " elements) in the model");
    }
    if (ckpt.tensors.size() != model.tensors.size())
        throw Error(ErrorCode::invalid_argument,
                    prefix + "the checkpoint has " + std::to_string(ckpt.tensors.size()) + " tensors, the model " +
                        std::to_string(model.tensors.size()) + " (first extra tensor: '" +
                        (ckpt.tensors.size() > n ? ckpt.tensors[n].name : model.tensors[n].name) + "')");
}

std::string params_file_name(const std::string &generation) { return "model." + generation + ".safetensors"; }

bool is_params_file_name(const std::string &name) {
    // model.<16 hex>.safetensors
    const std::string prefix = "model.", suffix = ".safetensors";
    if (name.size() != prefix.size() + 16 + suffix.size() || name.rfind(prefix, 0) != 0 ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
        return false;
    return name.substr(prefix.size(), 16).find_first_not_of("0123456789abcdef") == std::string::npos;
}

std::string shard_file_name(int rank, int world_size, const std::string &generation) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "shard-%05d-of-%05d.", rank, world_size);
    return buf + generation + ".shardopt";
}

bool is_shard_file_name(const std::string &name) {
    // shard-NNNNN-of-NNNNN.<hex>.shardopt, no path separators
    if (name.rfind("shard-", 0) != 0 || name.size() < 30) return false;
    if (name.find('/') != std::string::npos || name.find("..") != std::string::npos) return false;
    const std::string suffix = ".shardopt";
    return name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

} // namespace shardopt::checkpoint

// The checkpoint's description of itself, stored in the container header of the manifest
// (sharded form: metadata + the list of shard files) or of the consolidated file (metadata +
// the data itself). Shard files carry a smaller header: their rank, the generation and the
// layout, so a shard from another save is never mixed in.
//
// Header fields (JSON):
//   "format": "shardopt-checkpoint"
//   "kind": "sharded-manifest" | "consolidated" | "shard"
//   "layout": {"dtype": "f32"|"f64"|..., "tensors": [{"name": str, "count": n}, ...]}
//   "generation": 16 hex digits (unique per save; shard file names carry it)
//   "world_size": ranks that saved;  "rank": the writer (shard files)
//   "step_count": optimizer steps taken;  "state_slots": optimizer state arrays per element
//   "optimizer": {"kind": int, "kind_name": str, "lr": x, ...all OptimizerOptions}
//   "sharding": {"strategy": str, ...all ShardingOptions};  "local_sgd_position": step % period
//   "files": [{"name": str, "rank": r, "bytes": n, "header_xxh3": hex}]   (sharded-manifest)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardopt/types.hpp"

namespace shardopt::checkpoint {

inline constexpr const char *kFormatName = "shardopt-checkpoint";
inline constexpr const char *kManifestFile = "checkpoint.shardopt";
inline constexpr const char *kSafetensorsFile = "model.safetensors";

struct TensorInfo {
    std::string name;
    std::uint64_t count = 0;
};

struct LayoutInfo {
    DType dtype = DType::f32;
    std::vector<TensorInfo> tensors;
};

struct ShardFileInfo {
    std::string name;
    int rank = 0;
    std::uint64_t bytes = 0;
    std::uint64_t header_xxh3 = 0;
};

struct Manifest {
    std::string kind; // "sharded-manifest" or "consolidated"
    LayoutInfo layout;
    std::string generation;
    int world_size = 1;
    std::int64_t step_count = 0;
    int state_slots = 0;
    int optimizer_kind = 0;
    double lr = 0.0;
    nlohmann::json optimizer; // everything, for people and tools
    nlohmann::json sharding;
    std::vector<ShardFileInfo> files;
};

nlohmann::json layout_to_json(const LayoutInfo &layout);
// Writes the manifest's metadata fields (not "segments"/"data_bytes") into a header object.
nlohmann::json manifest_to_json(const Manifest &manifest);
// Validates and parses; throws Error(corrupt) naming `source` and the bad field.
Manifest manifest_from_json(const nlohmann::json &header, const std::string &source);
LayoutInfo layout_from_json(const nlohmann::json &j, const std::string &source);

// Throws Error(invalid_argument) naming the first difference between a checkpoint's layout
// and the model's (dtype, tensor count, a tensor's name or element count).
void check_same_layout(const LayoutInfo &checkpoint, const LayoutInfo &model);

// A saved consolidated checkpoint's parameters: model.<generation>.safetensors (the checkpoint's
// header indexes and checksums them; model.safetensors is a link to the latest).
std::string params_file_name(const std::string &generation);
bool is_params_file_name(const std::string &name);

// Shard file name: shard-<rank>-of-<world>.<generation>.shardopt
std::string shard_file_name(int rank, int world_size, const std::string &generation);
bool is_shard_file_name(const std::string &name);

} // namespace shardopt::checkpoint

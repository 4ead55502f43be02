// Checkpoints without a job (shardopt-ckpt, shardopt_checkpoint_* in the C ABI): inspect and
// verify a checkpoint of either form, convert it between the forms and to any world size, export
// its parameters (and optimizer state) as safetensors. No communicator and no optimizer: the
// files are read and written a window at a time (SHARDOPT_CHECKPOINT_WINDOW_BYTES, and at most one
// segment of the source), so a model larger than memory converts on a small machine.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace shardopt::checkpoint {

// The checkpoint at `path` (a directory or its manifest file) described as JSON: form, format
// version, step, world size, strategy, optimizer, layout, files. With `verify`, every segment is
// read and its checksum checked, every element of every part found (and the ranks' own states),
// and "digests" gives each part's XXH3 over its packed elements: two checkpoints that resume the
// same way have the same digests, whatever their form and world size. Throws Error(corrupt | io |
// invalid_argument) naming what is wrong.
nlohmann::json inspect_checkpoint(const std::string &path, bool verify);

struct ConvertOptions {
    bool consolidated = true; // else sharded
    int world_size = 0;       // 0: the source's. The ranks' own states (compression residuals) are
                              // kept only at the source's world size, as a load keeps them.
};
// Writes the checkpoint at `src` into directory `dst` (created; a checkpoint there is replaced
// atomically, as a save replaces it) in the other form or at another world size. A sharded result
// gives rank r of M the r-th of M even slices of every tensor. `dst` must not be `src`.
void convert_checkpoint(const std::string &src, const std::string &dst, const ConvertOptions &options);

// The parameters of the checkpoint at `src` as a safetensors file `params_path` (1-D tensors by
// name); with `state_path` not empty, the optimizer state too, one tensor per parameter tensor and
// slot, named "<tensor>.<slot>" after torch.optim's state names (exp_avg, exp_avg_sq,
// momentum_buffer, ...). Each file is written atomically.
void export_checkpoint(const std::string &src, const std::string &params_path, const std::string &state_path);

} // namespace shardopt::checkpoint

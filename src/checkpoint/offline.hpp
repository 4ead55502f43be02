// Checkpoints without a job (shardopt-ckpt, shardopt_checkpoint_* in the C ABI): inspect and
// verify a checkpoint of either form, convert it between the forms and to any world size, export
// its parameters (and optimizer state) as safetensors. No communicator and no optimizer: the
// files are read and written a window at a time (SHARDOPT_CHECKPOINT_WINDOW_BYTES, and at most one
// segment of the source), so a model larger than memory converts on a small machine.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "manifest.hpp"

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

// How torch.optim keeps the state of the optimizer a checkpoint holds: what export, inspect and
// the C ABI's torch form (shardopt_checkpoint_describe) name the slots.
struct TorchState {
    std::vector<std::string> slots; // torch's name of each state slot (exp_avg, ...), else "state<k>"
    std::string torch_class;        // torch.optim's class whose state_dict() holds exactly these
                                    // ("AdamW"); empty when none does (LAMB, Lion, NAdam's mu_product,
                                    // Adafactor, Muon)
    bool step = false;              // that class keeps a "step" per parameter (all but SGD)
};
TorchState torch_state(const Manifest &m);

// A consolidated checkpoint in memory (serialize()'s bytes), read without an optimizer.
struct SerializedCheckpoint {
    Manifest meta;
    TorchState torch;
    std::uint64_t element_count = 0; // packed (no padding)
};
SerializedCheckpoint describe_serialized(const void *bytes, std::size_t size);
// Part `slot` (-1: the parameters, else that state slot) of every tensor, packed in the layout's
// order, into `out` (`count` = the element count, in the checkpoint's dtype); checksums checked.
void read_serialized_part(const void *bytes, std::size_t size, int slot, void *out, std::uint64_t count);

} // namespace shardopt::checkpoint

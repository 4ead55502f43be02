// The consolidated form without gathering: the file's layout is fixed in advance from where every
// rank's parts are (a plan), each rank hashes the pieces it holds, and then either every rank
// writes its own byte ranges of the one file (save(consolidated)), or the bytes stream in file
// order, piece by piece from the rank holding them, to the ranks that want them (serialize(), and
// save(consolidated) with SHARDOPT_CHECKPOINT_WRITER=rank0). No rank holds more than its own parts
// and one window (SHARDOPT_CHECKPOINT_WINDOW_BYTES, 32 MiB by default; a piece is at most that).
//
// The bytes are the consolidated container of container_format.hpp: its data is the parameters,
// then each state slot, every tensor's elements in order, then the ranks' own states; a tensor is
// cut into several segments (the ranks' chunks, at most a window each). serialize() streams them
// as version 1 (self-contained; any loader of version 1 reads it). A saved checkpoint keeps its
// parameters once, as the data of model.<generation>.safetensors, which its header (version 2)
// indexes and checksums: the parameters' segments name that file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "byte_io.hpp"
#include "checkpoint_target.hpp"
#include "manifest.hpp"

namespace shardopt::checkpoint {

// The window: the most bytes a piece holds, and what a rank buffers beyond its own parts.
std::size_t checkpoint_window_bytes();

struct ConsolidatedPlan {
    struct Piece {
        std::string part;             // "param", "state.<k>", "rank_state.<r>"
        int slot = -1;                // -1 parameters, k state slot k, -2 a rank state
        int tensor = 0;               // in the model's layout (a rank state: 0)
        std::uint64_t offset = 0;     // first element in the tensor
        std::uint64_t count = 0;      // elements (a rank state: bytes)
        int owner = 0;                // the world rank holding its bytes
        std::uint64_t data_offset = 0, bytes = 0;
        std::uint64_t xxh3 = 0;       // known everywhere after hash_pieces
        std::string file;             // empty: in the container's data area; else the parameters' file
        std::size_t at = 0;           // on the owner: first element in its part (CheckpointTarget::copy_part)
    };
    std::vector<Piece> pieces; // in file order
    Manifest manifest;          // kind "consolidated"
    std::uint64_t data_bytes = 0;
    std::uint64_t param_bytes = 0; // the packed parameters' bytes (first in the stream)
    std::uint64_t head_bytes = 0;  // preamble + header (the same with and without checksums)
    // A saved checkpoint: the parameters' file (model.<generation>.safetensors) and what precedes
    // its data; empty when the parameters are in the container's data area (serialize()).
    std::string params_file, params_head;
    std::vector<unsigned char> rank_state; // this rank's (its rank state piece)

    std::uint64_t file_bytes() const { return head_bytes + data_bytes; }
    // The bytes of one of this rank's pieces: read into `buffer` (resized), or its rank state.
    const unsigned char *fetch(CheckpointTarget &target, const Piece &piece, std::vector<unsigned char> &buffer) const;
    // Preamble + header with the checksums known so far.
    std::string head() const;
};

// Collective over the target's world: checks, the model's layout, every rank's pieces.
// `params_file`: place the parameters in model.<generation>.safetensors (a save), else in the data.
ConsolidatedPlan plan_consolidated(CheckpointTarget &target, const char *what, bool params_file = false);
// Collective: each owner hashes its pieces; every rank learns every checksum.
void hash_pieces(CheckpointTarget &target, ConsolidatedPlan &plan);
// Collective: the file's bytes in order into `sink` on each rank that passes one (null: this rank
// wants none; its pieces still go to the others). A sink that throws stops receiving; once the
// stream is over every rank throws the first such error (run_agreed).
void stream_consolidated(CheckpointTarget &target, const ConsolidatedPlan &plan, ByteSink *sink);

// save(consolidated): the checkpoint file and model.safetensors in `dir`, atomically. `every_rank`:
// each rank writes its own ranges of the two files (a file system every rank sees); else rank 0
// writes them from the stream.
void save_consolidated(CheckpointTarget &target, const std::string &dir, bool every_rank);

// model.safetensors in `dir`: a hard link to the parameters' file (a copy where links are not
// possible), replaced atomically.
void link_safetensors(const std::string &dir, const std::string &params_file, const std::string &tag);

} // namespace shardopt::checkpoint

// load() and deserialize(): a checkpoint of either form, saved at any world size and strategy,
// validated whole and staged on every rank before any rank changes anything (resharding.hpp
// reads each part's segments wherever they are).
#include <algorithm>
#include <cmath>

#include "atomic_file.hpp"
#include "checkpoint_reader.hpp"
#include "checkpoint_target.hpp"
#include "collective_errors.hpp"
#include "container_format.hpp"
#include "resharding.hpp"
#include "stage_layouts.hpp"
#include "target_manifest.hpp"
#include "shardopt/error.hpp"

namespace shardopt::checkpoint {

void deserialize(CheckpointTarget &target, const void *data, std::size_t size) {
    require(data != nullptr || size == 0, ErrorCode::invalid_argument, "deserialize: null buffer with a nonzero size");
    load(target, std::string(), data ? data : "", size);
}

void load(CheckpointTarget &target, const std::string &dir, const void *bytes, std::size_t size) {
    Communicator &world = target.world();
    const ParameterSet &layout = target.layout();
    const OptimizerKind kind = target.optimizer_options().kind;
    const int slots = target.state_slots();
    const std::size_t elem = layout.element_size();
    // New contents are staged here and committed only when every rank has all of them.
    std::vector<unsigned char> new_params;
    std::vector<std::vector<unsigned char>> new_state;
    std::vector<unsigned char> new_rank_state;
    bool has_rank_state = false;
    Manifest meta;
    ModelLayout model;
    run_agreed(world, [&] { check_checkpointable(target, bytes ? "deserialize" : "load"); });
    run_agreed(world, [&] { model = model_layout(world, target.placement(), layout); }); // collective
    run_agreed(world, [&] {
        // LocalSGD keeps one replica per rank: at the same world size each rank takes its own.
        std::vector<int> saved_index;
        OpenCheckpoint open = open_checkpoint(
            dir, bytes, size,
            [&](const Manifest &m) {
                return target.sharding().strategy == Strategy::local_sgd && m.world_size == world.size() ? world.rank()
                                                                                                          : -1;
            },
            [&](const OpenCheckpoint &o) {
                const Manifest &m = o.meta;
                // By name: a checkpoint of pipeline stages loads into another depth or a whole-model optimizer.
                saved_index = match_tensors(m.layout, layout_info(layout), model.info.tensors.size());
                require(m.optimizer_kind == int(kind), ErrorCode::invalid_argument,
                        std::string("checkpoint was saved by a ") + optimizer_kind_name(OptimizerKind(m.optimizer_kind)) +
                            " optimizer (kind " + std::to_string(m.optimizer_kind) + "), this optimizer is " +
                            optimizer_kind_name(kind));
                require(m.state_slots == slots, ErrorCode::invalid_argument,
                        "checkpoint holds " + std::to_string(m.state_slots) +
                            " optimizer state arrays per element, this " + optimizer_kind_name(kind) +
                            " optimizer uses " + std::to_string(slots) + " (momentum/amsgrad/centered options differ)");
                require(std::isfinite(m.lr) && m.lr >= 0.0, ErrorCode::corrupt,
                        o.manifest_path + ": learning rate " + std::to_string(m.lr) + " is not valid");
            });
        meta = open.meta;
        const SegmentIndex &index = *open.index;

        // Stage: the parameters from their current storage (padding and anything not owned stay
        // as they are); the state from zeros, as a target's host_part(k) shows what it does not
        // own (and commit writes only what it owns), so no copy of the current state is made.
        const unsigned char *current = target.host_part(-1);
        new_params.assign(current, current + target.part_elements(-1) * elem);
        for (int k = 0; k < slots; ++k) new_state.emplace_back(target.part_elements(k) * elem, 0);
        const Placement &placement = target.placement();
        const std::vector<OwnedSegment> whole = whole_tensors(layout);
        for (int k = -1; k < slots; ++k) {
            const bool sharded = k < 0 ? placement.params_sharded : placement.state_sharded;
            unsigned char *base = k < 0 ? new_params.data() : new_state[std::size_t(k)].data();
            for (const auto &s : sharded ? target.chunk_segments() : whole)
                index.read(part_name(k), saved_index[std::size_t(s.tensor)], s.flat - layout.tensor(s.tensor).offset,
                           s.count, base + (sharded ? s.local : s.flat) * elem);
        }
        // A rank's own state only means something to the same rank of the same world.
        if (meta.world_size == world.size())
            has_rank_state = index.read_rank_state(rank_state_part(world.rank()), new_rank_state);
    });
    // Commit: every rank has everything.
    target.commit(new_params, new_state, meta.step_count, meta.lr, has_rank_state ? &new_rank_state : nullptr);
}

} // namespace shardopt::checkpoint

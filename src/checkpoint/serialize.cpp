// serialize(): the consolidated form in memory, every stage's parts gathered to rank 0 and the
// bytes broadcast, so every rank gets the same.
#include <algorithm>

#include "checkpoint_target.hpp"
#include "collective_errors.hpp"
#include "container_format.hpp"
#include "stage_layouts.hpp"
#include "target_manifest.hpp"
#include "shardopt/error.hpp"

namespace shardopt::checkpoint {

std::vector<unsigned char> serialize(CheckpointTarget &target) {
    Communicator &world = target.world();
    const ParameterSet &layout = target.layout();
    ModelLayout model;
    run_agreed(world, [&] { check_checkpointable(target, "serialize"); });
    run_agreed(world, [&] { model = model_layout(world, target.placement(), layout); }); // collective
    const std::size_t elem = layout.element_size(), n = layout.element_count();
    std::vector<unsigned char> params(n * elem);
    target.gather_packed(-1, params.data()); // collective (FSDP, hybrid)
    std::vector<std::vector<unsigned char>> state(std::size_t(target.state_slots()), std::vector<unsigned char>(n * elem));
    for (std::size_t k = 0; k < state.size(); ++k) target.gather_packed(int(k), state[k].data());
    if (model.root.size() > 1) { // pipeline stages: every stage's parts, stage after stage
        auto whole = [&](std::vector<unsigned char> &mine) {
            std::vector<unsigned char> all;
            for (std::size_t s = 0; s < model.root.size(); ++s) {
                std::size_t count = 0;
                for (int t = 0; t < model.tensor_count[s]; ++t)
                    count += model.info.tensors[std::size_t(model.first_tensor[s] + t)].count;
                std::vector<unsigned char> part = world.rank() == model.root[s] ? mine : std::vector<unsigned char>(count * elem);
                world.broadcast(part.data(), part.size(), DType::u8, model.root[s]);
                all.insert(all.end(), part.begin(), part.end());
            }
            mine = std::move(all);
        };
        whole(params);
        for (auto &slot : state) whole(slot);
    }

    // Every rank's rank state, gathered to all (padded to the largest).
    const std::vector<unsigned char> own_state = target.rank_state();
    std::vector<std::int64_t> state_sizes(std::size_t(world.size()));
    const std::int64_t own_size = std::int64_t(own_state.size());
    world.allgather(&own_size, state_sizes.data(), 1, DType::i64);
    const std::size_t widest = std::size_t(*std::max_element(state_sizes.begin(), state_sizes.end()));
    std::vector<unsigned char> rank_states;
    if (widest > 0) {
        std::vector<unsigned char> padded(widest, 0);
        std::copy(own_state.begin(), own_state.end(), padded.begin());
        rank_states.resize(widest * std::size_t(world.size()));
        world.allgather(padded.data(), rank_states.data(), widest, DType::u8);
    }
    std::vector<unsigned char> bytes;
    if (world.rank() == 0) {
        Manifest manifest = manifest_of(target, world.size());
        manifest.layout = model.info;
        manifest.kind = "consolidated";
        manifest.generation = new_generation();
        std::vector<SegmentData> data;
        for (int k = -1; k < int(state.size()); ++k) {
            const unsigned char *base = k < 0 ? params.data() : state[std::size_t(k)].data();
            std::size_t at = 0;
            for (int t = 0; t < int(model.info.tensors.size()); ++t) {
                const std::size_t count = model.info.tensors[std::size_t(t)].count;
                data.push_back({part_name(k), t, 0, count, base + at * elem, count * elem});
                at += count;
            }
        }
        for (int r = 0; r < world.size(); ++r)
            if (state_sizes[std::size_t(r)] > 0)
                data.push_back({rank_state_part(r), 0, 0, std::uint64_t(state_sizes[std::size_t(r)]),
                                rank_states.data() + std::size_t(r) * widest, std::size_t(state_sizes[std::size_t(r)])});
        VectorSink sink(bytes);
        write_container(sink, manifest_to_json(manifest), data);
    }
    std::int64_t size = std::int64_t(bytes.size());
    world.broadcast(&size, 1, DType::i64, 0);
    bytes.resize(std::size_t(size));
    world.broadcast(bytes.data(), bytes.size(), DType::u8, 0);
    return bytes;
}

} // namespace shardopt::checkpoint

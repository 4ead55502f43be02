#include "stage_layouts.hpp"

#include <map>
#include <string>

#include "shardopt/error.hpp"

namespace shardopt::checkpoint {

ModelLayout model_layout(Communicator &world, const Placement &grid, const ParameterSet &layout) {
    ModelLayout m;
    m.info.dtype = layout.dtype();
    if (grid.pp_size == 1) {
        for (const auto &t : layout.tensors()) m.info.tensors.push_back({t.name, t.count});
        m.first_tensor = {0};
        m.tensor_count = {layout.tensor_count()};
        m.root = {0};
        return m;
    }
    // Each stage's rank with dp = tp = 0 broadcasts its tensors (the rank order of Placement, the hybrid grid's).
    for (int s = 0; s < grid.pp_size; ++s) {
        const int root = s * grid.dp_size * grid.tp_size;
        std::string names;
        std::vector<std::int64_t> counts;
        if (world.rank() == root)
            for (const auto &t : layout.tensors()) {
                names += t.name + '\n';
                counts.push_back(std::int64_t(t.count));
            }
        std::int64_t sizes[2] = {std::int64_t(counts.size()), std::int64_t(names.size())};
        world.broadcast(sizes, 2, DType::i64, root);
        counts.resize(std::size_t(sizes[0]));
        names.resize(std::size_t(sizes[1]));
        world.broadcast(counts.data(), counts.size(), DType::i64, root);
        world.broadcast(names.data(), names.size(), DType::u8, root);
        if (s == grid.pp_rank) m.base = int(m.info.tensors.size());
        m.first_tensor.push_back(int(m.info.tensors.size()));
        m.tensor_count.push_back(int(counts.size()));
        m.root.push_back(root);
        std::size_t at = 0;
        for (std::int64_t c : counts) {
            const std::size_t end = names.find('\n', at);
            m.info.tensors.push_back({names.substr(at, end - at), std::uint64_t(c)});
            at = end + 1;
        }
    }
    std::map<std::string, int> stage_of;
    for (int s = 0; s < grid.pp_size; ++s)
        for (int t = m.first_tensor[std::size_t(s)]; t < m.first_tensor[std::size_t(s)] + m.tensor_count[std::size_t(s)]; ++t) {
            const auto [it, fresh] = stage_of.emplace(m.info.tensors[std::size_t(t)].name, s);
            require(fresh, ErrorCode::invalid_argument,
                    "checkpoint: tensor '" + it->first + "' is held by pipeline stages " + std::to_string(it->second) +
                        " and " + std::to_string(s) + "; stages must name their tensors uniquely (by global layer name)");
        }
    return m;
}

std::vector<int> match_tensors(const LayoutInfo &saved, const LayoutInfo &mine, std::size_t model_tensors) {
    const bool whole_model = model_tensors == mine.tensors.size();
    std::vector<int> map;
    bool same_order = saved.tensors.size() == mine.tensors.size();
    for (std::size_t i = 0; same_order && i < mine.tensors.size(); ++i)
        same_order = saved.tensors[i].name == mine.tensors[i].name;
    // The usual case, and every mismatch of a whole-model layout: compared in order.
    if (whole_model && (same_order || saved.dtype != mine.dtype)) check_same_layout(saved, mine);
    const std::string prefix = "checkpoint does not match the model's parameter layout: ";
    if (saved.dtype != mine.dtype)
        throw Error(ErrorCode::invalid_argument, prefix + "dtype is " + dtype_name(saved.dtype) + " in the checkpoint but " +
                                                     dtype_name(mine.dtype) + " in the model");
    std::map<std::string, int> index;
    for (std::size_t i = 0; i < saved.tensors.size(); ++i) index.emplace(saved.tensors[i].name, int(i));
    for (const auto &t : mine.tensors) {
        const auto it = index.find(t.name);
        if (it == index.end()) {
            if (whole_model) check_same_layout(saved, mine);
            throw Error(ErrorCode::invalid_argument, prefix + "the checkpoint has no tensor '" + t.name + "'");
        }
        const auto &s = saved.tensors[std::size_t(it->second)];
        require(s.count == t.count, ErrorCode::invalid_argument,
                prefix + "tensor '" + t.name + "' has " + std::to_string(s.count) + " elements in the checkpoint but " +
                    std::to_string(t.count) + " in the model");
        map.push_back(it->second);
    }
    if (saved.tensors.size() != model_tensors) {
        if (whole_model) check_same_layout(saved, mine);
        throw Error(ErrorCode::invalid_argument, prefix + "the checkpoint has " + std::to_string(saved.tensors.size()) +
                                                     " tensors, the model's pipeline stages hold " +
                                                     std::to_string(model_tensors));
    }
    return map;
}

} // namespace shardopt::checkpoint

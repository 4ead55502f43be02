#include "model_layout.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "shardopt/error.hpp"

namespace shardopt::planner {
namespace {

struct Tensor {
    std::string name;
    std::size_t rows, cols;
    bool replicated; // the same on every tensor-parallel rank
};

// Every tensor of the model, in order (the caller's, or the transformer's).
std::vector<Tensor> model_tensors(const ModelSpec &model) {
    std::vector<Tensor> all;
    if (model.layout.tensor_count() > 0) {
        for (const TensorLayout &t : model.layout.tensors())
            all.push_back({t.name, t.rows > 0 ? t.rows : 1, t.rows > 0 ? t.count / t.rows : t.count, t.tp_replicated});
        return all;
    }
    const ModelShape s = model_shape(model);
    if (s.layers == 0) return {{"weights", 1, std::size_t(std::llround(s.parameters)), false}};
    const std::size_t h = std::size_t(s.hidden);
    double used = 0.0;
    for (int l = 0; l < s.layers; ++l) {
        const std::string p = "layer" + std::to_string(l) + ".";
        all.push_back({p + "attn.qkv", 3 * h, h, false});
        all.push_back({p + "attn.out", h, h, false});
        all.push_back({p + "mlp.in", 4 * h, h, false});
        all.push_back({p + "mlp.out", h, 4 * h, false});
        all.push_back({p + "norms", 1, 4 * h, true});
        used += 12.0 * double(h) * double(h) + 4.0 * double(h);
    }
    // The rest of the count: the embedding (first), split across tensor-parallel ranks by rows.
    const double rest = s.parameters - used;
    const std::size_t rows = rest >= double(h) ? std::size_t(rest / double(h)) : 0;
    if (rows > 0) all.insert(all.begin(), {"embedding", rows, h, false});
    const double left = rest - double(rows) * double(h);
    if (left >= 1.0) all.push_back({"head.bias", 1, std::size_t(std::llround(left)), true});
    return all;
}

} // namespace

ModelShape model_shape(const ModelSpec &model) {
    ModelShape s;
    s.parameters = model.parameters;
    require(std::isfinite(s.parameters) && s.parameters >= 1.0 && s.parameters < 1e15, ErrorCode::invalid_argument,
            "the model needs a parameter count between 1 and 1e15 (got " + std::to_string(s.parameters) + ")");
    s.hidden = model.hidden;
    s.layers = model.layers;
    if (s.hidden <= 0) { // 12 L h^2 parameters with h = 128 L, as 7B and 13B models are shaped
        const double h = std::cbrt(s.parameters * 128.0 / 12.0);
        s.hidden = std::max(64, int(std::round(h / 64.0)) * 64);
    }
    if (s.layers <= 0) s.layers = std::max(1, int(std::round(s.parameters / (12.0 * double(s.hidden) * s.hidden))));
    while (s.layers > 1 && 12.0 * double(s.hidden) * s.hidden * s.layers > s.parameters) --s.layers;
    if (12.0 * double(s.hidden) * s.hidden * s.layers > s.parameters) { // too small for one block: one flat tensor
        s.layers = 0;
        s.hidden = std::max(1, int(std::min(s.parameters, 4096.0)));
    }
    return s;
}

ParameterSet stage_layout(const ModelSpec &model, DType dtype, int stage, int stages, int tp) {
    const std::vector<Tensor> all = model_tensors(model);
    require(!all.empty(), ErrorCode::invalid_argument, "the model has no parameters");
    require(stages >= 1 && int(all.size()) >= stages, ErrorCode::invalid_argument,
            "the model's " + std::to_string(all.size()) + " tensors cannot be cut into " + std::to_string(stages) +
                " pipeline stages");
    double total = 0.0;
    for (const Tensor &t : all) total += double(t.rows) * double(t.cols);
    // Stage s takes the tensors whose cumulative count ends in its share (at least one each).
    std::vector<int> first(std::size_t(stages) + 1, int(all.size()));
    first[0] = 0;
    double seen = 0.0;
    int s = 1;
    for (int i = 0; i < int(all.size()) && s < stages; ++i) {
        seen += double(all[std::size_t(i)].rows) * double(all[std::size_t(i)].cols);
        const int left = int(all.size()) - (i + 1);
        if ((seen >= total * s / stages && i + 1 > first[std::size_t(s - 1)]) || left == stages - s) first[std::size_t(s++)] = i + 1;
    }
    const std::size_t bucket_bytes = model.layout.tensor_count() > 0 ? model.layout.bucket_bytes() : ParameterSet::kDefaultBucketBytes;
    ParameterSet layout(dtype, bucket_bytes);
    for (int i = first[std::size_t(stage)]; i < first[std::size_t(stage) + 1]; ++i) {
        const Tensor &t = all[std::size_t(i)];
        std::size_t rows = t.rows;
        if (!t.replicated && tp > 1) rows = std::max<std::size_t>(1, (rows + std::size_t(tp) - 1) / std::size_t(tp));
        if (rows > 1) layout.add_matrix(t.name, rows, t.cols, t.replicated);
        else layout.add(t.name, rows * t.cols, t.replicated);
    }
    return layout;
}

} // namespace shardopt::planner

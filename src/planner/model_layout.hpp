// The parameters one rank registers: the caller's layout, or a transformer of a given size, cut
// into pipeline stages (tensors in order, stages of about equal size) and split over the tensor-
// parallel ranks (every tensor but the replicated ones, as Megatron-style layers split them).
#pragma once

#include "shardopt/planner.hpp"

namespace shardopt::planner {

struct ModelShape {
    int layers = 0, hidden = 0;
    double parameters = 0.0;
};

// The transformer's shape for the spec (layers, hidden from the parameter count when not given).
ModelShape model_shape(const ModelSpec &model);
// The layout of pipeline stage `stage` of `stages` on one of `tp` tensor-parallel ranks, in
// `dtype` with the base options' bucket size (unplanned).
ParameterSet stage_layout(const ModelSpec &model, DType dtype, int stage, int stages, int tp);

} // namespace shardopt::planner

// The low-bit engine tests' layout and rules (unit.lowbit_engine in host memory,
// gpu_emulated.lowbit_engine and gpu.lowbit_engine in cuda memory): quantized tensors of sizes that
// are no multiple of either block (and one exactly the smallest quantized size), a small one that
// keeps full state, in buckets that cut them across ranks.
#pragma once

#include <cstddef>

#include "shardopt/optim.hpp"
#include "shardopt/params.hpp"

namespace shardopt::testing {

inline ParameterSet lowbit_layout() {
    ParameterSet layout(DType::f32, 24 * 1024);
    layout.add("a", 5000);
    layout.add("small", 300);
    layout.add("c", 9017);
    layout.end_bucket();
    layout.add("d", 4096);
    return layout;
}

// Elements of the layout (one rank's plan: every tensor whole).
inline std::size_t lowbit_element_count() {
    ParameterSet layout = lowbit_layout();
    layout.plan(1);
    return layout.element_count();
}

// The rule of each kind the tests train: momentum for SGD, decay for AdamW, at `precision`.
inline OptimizerOptions lowbit_rule(OptimizerKind kind, StatePrecision precision) {
    OptimizerOptions o = OptimizerOptions::defaults(kind);
    o.lr = 0.01;
    if (kind == OptimizerKind::sgd) o.momentum = 0.9;
    if (kind == OptimizerKind::adamw) o.weight_decay = 0.05;
    o.state_precision = precision;
    return o;
}

} // namespace shardopt::testing

// One factory per update rule; Optimizer::create picks by kind. Options are already validated.
#pragma once

#include <memory>

#include "shardopt/optim.hpp"

namespace shardopt {

std::unique_ptr<Optimizer> make_sgd(const OptimizerOptions &options);
// Adam and AdamW: options.kind selects L2 (adam) or decoupled (adamw) weight decay.
std::unique_ptr<Optimizer> make_adam(const OptimizerOptions &options);
std::unique_ptr<Optimizer> make_rmsprop(const OptimizerOptions &options);
std::unique_ptr<Optimizer> make_adagrad(const OptimizerOptions &options);
std::unique_ptr<Optimizer> make_lamb(const OptimizerOptions &options);

} // namespace shardopt

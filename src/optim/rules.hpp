// One factory per update rule; Optimizer::create picks by kind. Options are already validated.
#pragma once

#include <memory>
#include <string>

#include "shardopt/optim.hpp"

namespace shardopt {

std::unique_ptr<Optimizer> make_sgd(const OptimizerOptions &options);
// Adam and AdamW: options.kind selects L2 (adam) or decoupled (adamw) weight decay.
std::unique_ptr<Optimizer> make_adam(const OptimizerOptions &options);
std::unique_ptr<Optimizer> make_rmsprop(const OptimizerOptions &options);
std::unique_ptr<Optimizer> make_adagrad(const OptimizerOptions &options);
std::unique_ptr<Optimizer> make_lamb(const OptimizerOptions &options);
std::unique_ptr<Optimizer> make_lion(const OptimizerOptions &options);
std::unique_ptr<Optimizer> make_adafactor(const OptimizerOptions &options);
std::unique_ptr<Optimizer> make_nadam(const OptimizerOptions &options);
std::unique_ptr<Optimizer> make_adamax(const OptimizerOptions &options);
std::unique_ptr<Optimizer> make_adadelta(const OptimizerOptions &options);
std::unique_ptr<Optimizer> make_muon(const OptimizerOptions &options);
// Adam, AdamW or SGD with momentum over 8-bit or 4-bit state (lowbit_rules.cpp).
std::unique_ptr<Optimizer> make_lowbit(const OptimizerOptions &options);


} // namespace shardopt

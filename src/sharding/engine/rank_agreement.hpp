// What every rank of an optimizer must agree on, checked collectively so a disagreement fails on
// every rank, naming the first difference, instead of training silently wrong or hanging.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "shardopt/comm.hpp"
#include "shardopt/optim.hpp"
#include "shardopt/params.hpp"
#include "shardopt/sharded_optimizer.hpp"

namespace shardopt::engine {

// A named value a rank reports; doubles travel as their bit patterns.
struct Fact {
    const char *name;
    std::int64_t value;
};
Fact fact(const char *name, double value);
Fact fact(const char *name, std::int64_t value);

// Collective over `group` (host buffers): every rank passes the same number of facts. Throws
// Error(mismatch) on every rank when the ranks disagree on one, naming the first such fact
// ("<context>: ranks disagree on <name> (rank r has v, range across ranks lo..hi)").
void require_agreement(Communicator &group, const std::vector<Fact> &facts, const std::string &context);

// The options every rank of one optimizer must share (collective over the world).
void require_same_options(Communicator &world, const OptimizerOptions &optimizer, const ShardingOptions &sharding);

// The parameter layout (dtype, tensors' names, counts, buckets, tensor-parallel flags) over a
// group whose ranks reduce gradients together: the first differing tensor is named.
void require_same_layout(Communicator &group, const ParameterSet &layout);

} // namespace shardopt::engine

#include "rank_agreement.hpp"

#include <cstring>

#include "shardopt/error.hpp"

namespace shardopt::engine {

Fact fact(const char *name, double value) {
    std::int64_t bits = 0;
    std::memcpy(&bits, &value, sizeof bits);
    return {name, bits};
}

Fact fact(const char *name, std::int64_t value) { return {name, value}; }

namespace {

// Index of the first fact whose minimum and maximum across the group differ, or -1; lo/hi get
// the ranges (two allreduces whatever the count).
long first_difference(Communicator &group, const std::vector<std::int64_t> &values, std::vector<std::int64_t> &lo,
                      std::vector<std::int64_t> &hi) {
    lo.assign(values.size(), 0);
    hi.assign(values.size(), 0);
    if (values.empty()) return -1;
    group.allreduce(values.data(), lo.data(), values.size(), DType::i64, ReduceOp::min);
    group.allreduce(values.data(), hi.data(), values.size(), DType::i64, ReduceOp::max);
    for (std::size_t i = 0; i < values.size(); ++i)
        if (lo[i] != hi[i]) return long(i);
    return -1;
}

std::uint64_t name_hash(const std::string &name) { // FNV-1a: equal names, equal hashes
    std::uint64_t h = 1469598103934665603ull;
    for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
    return h >> 1; // non-negative as int64
}

} // namespace

void require_agreement(Communicator &group, const std::vector<Fact> &facts, const std::string &context) {
    std::vector<std::int64_t> values, lo, hi;
    for (const Fact &f : facts) values.push_back(f.value);
    const long i = first_difference(group, values, lo, hi);
    if (i < 0) return;
    throw Error(ErrorCode::mismatch, context + ": ranks disagree on " + facts[std::size_t(i)].name + " (rank " +
                                         std::to_string(group.rank()) + " has " + std::to_string(values[std::size_t(i)]) +
                                         ", range across ranks " + std::to_string(lo[std::size_t(i)]) + ".." +
                                         std::to_string(hi[std::size_t(i)]) + ")");
}

void require_same_options(Communicator &world, const OptimizerOptions &o, const ShardingOptions &s) {
    const std::vector<Fact> facts = {
        fact("the strategy", std::int64_t(s.strategy)),
        fact("the memory space", std::int64_t(s.memory)),
        fact("gradient_accumulation_steps", std::int64_t(s.gradient_accumulation_steps)),
        fact("max_grad_norm (bits)", s.max_grad_norm),
        fact("skip_nonfinite", std::int64_t(s.skip_nonfinite)),
        fact("staging_buffers", std::int64_t(s.staging_buffers)),
        fact("fsdp_prefetch", std::int64_t(s.fsdp_prefetch)),
        fact("pipeline_parallel_size", std::int64_t(s.pipeline_parallel_size)),
        fact("tensor_parallel_size", std::int64_t(s.tensor_parallel_size)),
        fact("data_parallel_size", std::int64_t(s.data_parallel_size)),
        fact("hybrid_data_strategy", std::int64_t(s.hybrid_data_strategy)),
        fact("hsdp_replicas", std::int64_t(s.hsdp_replicas)),
        fact("local_sgd_period", std::int64_t(s.local_sgd_period)),
        fact("overlap_param_gather", std::int64_t(s.overlap_param_gather)),
        fact("compression.method", std::int64_t(s.compression.method)),
        fact("compression.ratio (bits)", s.compression.ratio),
        fact("compression.block_size", std::int64_t(s.compression.block_size)),
        fact("compression.power_sgd_rank", std::int64_t(s.compression.power_sgd_rank)),
        fact("compression.power_sgd_min_elements", std::int64_t(s.compression.power_sgd_min_elements)),
        fact("compression.error_feedback", std::int64_t(s.compression.error_feedback)),
        fact("cpu_offload_optimizer", std::int64_t(s.cpu_offload_optimizer)),
        fact("cpu_offload_gradients", std::int64_t(s.cpu_offload_gradients)),
        fact("cpu_offload_params", std::int64_t(s.cpu_offload_params)),
        fact("the optimizer kind", std::int64_t(o.kind)),
        fact("the learning rate (lr; its bits shown)", o.lr),
        fact("weight_decay (bits)", o.weight_decay),
        fact("maximize", std::int64_t(o.maximize)),
        fact("momentum (bits)", o.momentum),
        fact("dampening (bits)", o.dampening),
        fact("nesterov", std::int64_t(o.nesterov)),
        fact("beta1 (bits)", o.beta1),
        fact("beta2 (bits)", o.beta2),
        fact("eps (bits)", o.eps),
        fact("amsgrad", std::int64_t(o.amsgrad)),
        fact("alpha (bits)", o.alpha),
        fact("centered", std::int64_t(o.centered)),
        fact("lr_decay (bits)", o.lr_decay),
        fact("initial_accumulator_value (bits)", o.initial_accumulator_value),
    };
    require_agreement(world, facts, "creating the optimizer");
}

void require_same_layout(Communicator &group, const ParameterSet &layout) {
    require_agreement(group,
                      {fact("the parameter dtype", std::int64_t(layout.dtype())),
                       fact("the number of tensors", std::int64_t(layout.tensor_count())),
                       fact("the number of buckets", std::int64_t(layout.bucket_count()))},
                      "creating the optimizer (parameter layout)");
    // Same counts everywhere now: compare tensor by tensor and name the first that differs.
    std::vector<std::int64_t> values, lo, hi;
    for (int t = 0; t < layout.tensor_count(); ++t) {
        const auto &tl = layout.tensor(t);
        values.insert(values.end(), {std::int64_t(name_hash(tl.name)), std::int64_t(tl.count), std::int64_t(tl.bucket),
                                     std::int64_t(tl.tp_replicated), std::int64_t(tl.rows)});
    }
    const long i = first_difference(group, values, lo, hi);
    if (i < 0) return;
    static const char *what[5] = {"name", "element count", "bucket", "tensor-parallel replication", "matrix rows"};
    const int t = int(i / 5), k = int(i % 5);
    const auto &tl = layout.tensor(t);
    std::string detail = k == 0 ? "" : std::string(": ") + std::to_string(values[std::size_t(i)]) + " here, range across ranks " +
                                           std::to_string(lo[std::size_t(i)]) + ".." + std::to_string(hi[std::size_t(i)]);
    throw Error(ErrorCode::mismatch, "creating the optimizer: ranks disagree on the parameter layout at tensor " +
                                         std::to_string(t) + " ('" + tl.name + "' on rank " + std::to_string(group.rank()) +
                                         "), its " + what[k] + detail);
}

} // namespace shardopt::engine

#include "checkpoint_training.hpp"

#include <cstring>
#include <mutex>

#include "shardopt/batch_split.hpp"
#include "shardopt/inprocess.hpp"

namespace shardopt::testing {

ShardingOptions strategy_options(Strategy s) {
    ShardingOptions o;
    o.strategy = s;
    return o;
}

ShardingOptions hybrid_options(int dp, Strategy inner, int hsdp_replicas) {
    ShardingOptions o;
    o.strategy = Strategy::hybrid;
    o.data_parallel_size = dp;
    o.hybrid_data_strategy = inner;
    o.hsdp_replicas = hsdp_replicas;
    return o;
}

ParameterSet mlp_layout(const examples::MlpShape &shape, DType dtype) {
    ParameterSet layout(dtype);
    const auto tensors = examples::mlp_tensors(shape);
    for (std::size_t t = 0; t < tensors.size(); ++t) {
        layout.add(tensors[t].first, tensors[t].second);
        if (t == 1) layout.end_bucket();
    }
    return layout;
}

template <typename T>
void train_step(ShardedOptimizer &opt, const ResumeSetup &setup, const examples::Dataset &data) {
    const auto &layout = opt.layout();
    const int n_buckets = layout.bucket_count();
    std::vector<std::size_t> packed_offset(std::size_t(n_buckets), 0);
    for (int b = 1; b < n_buckets; ++b) packed_offset[b] = packed_offset[b - 1] + layout.bucket(b - 1).count;
    std::vector<T> params(layout.element_count()), grad(layout.element_count());
    // The batch is split over the data-parallel ranks (every rank of the world for flat
    // strategies; hybrid: the data group position).
    const auto pos = opt.grid_position();
    const std::int64_t n = std::int64_t(setup.samples), r = pos.dp_rank, w = pos.dp_size;
    for (int m = 0; m < setup.accumulation; ++m) {
        for (int b = 0; b < n_buckets; ++b) {
            std::memcpy(params.data() + packed_offset[b], opt.gather(b), layout.bucket(b).count * sizeof(T));
            opt.release(b);
        }
        const std::int64_t mlo = n * m / setup.accumulation, mhi = n * (m + 1) / setup.accumulation;
        const BatchSlice slice = batch_slice(mlo, mhi - mlo, int(r), int(w));
        const std::vector<std::int64_t> idx = slice.indices();
        std::fill(grad.begin(), grad.end(), T(0));
        if (!idx.empty()) examples::mlp_loss_grad<T>(setup.shape, data, params.data(), grad.data(), idx.data(), idx.size());
        const T weight = T(slice.weight);
        for (T &g : grad) g *= weight;
        opt.zero_grad();
        for (int b = n_buckets - 1; b >= 0; --b) {
            std::memcpy(opt.bucket_grad(b), grad.data() + packed_offset[b], layout.bucket(b).count * sizeof(T));
            opt.grad_ready(b);
        }
        opt.step();
    }
}

template <typename T>
std::vector<T> run_training(const ResumeSetup &setup, int world, const ShardingOptions &options, int steps,
                            const OptimizerHook &before, const OptimizerHook &after) {
    const auto data = examples::make_blobs(setup.samples, setup.shape.inputs, setup.shape.classes);
    const auto init = examples::mlp_init<T>(setup.shape);
    std::vector<T> result;
    std::mutex mutex;
    run_inprocess(world, [&](Communicator &comm) {
        ShardingOptions o = options;
        o.gradient_accumulation_steps = setup.accumulation;
        auto opt = ShardedOptimizer::create(comm.shared_from_this(), mlp_layout(setup.shape, dtype_of<T>::value),
                                            setup.optimizer, o, init.data());
        if (before) before(*opt);
        for (int s = 0; s < steps; ++s) train_step<T>(*opt, setup, data);
        if (after) after(*opt);
        std::vector<T> final_params(init.size());
        opt->get_parameters(final_params.data());
        if (comm.rank() == 0) {
            std::lock_guard<std::mutex> lock(mutex);
            result = final_params;
        }
    });
    return result;
}

template void train_step<float>(ShardedOptimizer &, const ResumeSetup &, const examples::Dataset &);
template void train_step<double>(ShardedOptimizer &, const ResumeSetup &, const examples::Dataset &);
template std::vector<float> run_training<float>(const ResumeSetup &, int, const ShardingOptions &, int,
                                                const OptimizerHook &, const OptimizerHook &);
template std::vector<double> run_training<double>(const ResumeSetup &, int, const ShardingOptions &, int,
                                                  const OptimizerHook &, const OptimizerHook &);

} // namespace shardopt::testing

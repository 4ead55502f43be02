#include "training.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>

#include "shardopt/batch_split.hpp"
#include "shardopt/error.hpp"
#include "shardopt/inprocess.hpp"

namespace shardopt::testing {
namespace {

std::vector<std::int64_t> range(std::int64_t lo, std::int64_t hi) {
    std::vector<std::int64_t> v;
    for (std::int64_t i = lo; i < hi; ++i) v.push_back(i);
    return v;
}

// Gradient clipping as torch.nn.utils.clip_grad_norm_ does it, for the reference.
template <typename T> void clip(std::vector<T> &grad, double max_norm) {
    if (max_norm <= 0) return;
    double sumsq = 0;
    for (T g : grad) sumsq += double(g) * double(g);
    const double coef = std::min(1.0, max_norm / (std::sqrt(sumsq) + 1e-6));
    for (T &g : grad) g = T(g * T(coef));
}

} // namespace

template <typename T> std::vector<T> train_single_process(const TrainingSetup &setup) {
    const auto data = examples::make_blobs(setup.samples, setup.shape.inputs, setup.shape.classes);
    auto params = examples::mlp_init<T>(setup.shape);
    std::vector<T> grad(params.size()), micro(params.size());
    auto opt = Optimizer::create(setup.optimizer);
    std::vector<std::vector<T>> state(opt->state_slots(), std::vector<T>(params.size()));
    for (int k = 0; k < opt->state_slots(); ++k) std::fill(state[k].begin(), state[k].end(), T(opt->state_initial_value(k)));
    const auto tensors = examples::mlp_tensors(setup.shape);
    const std::int64_t n = std::int64_t(setup.samples);
    for (int step = 1; step <= setup.steps; ++step) {
        std::fill(grad.begin(), grad.end(), T(0));
        for (int m = 0; m < setup.accumulation; ++m) {
            auto idx = range(n * m / setup.accumulation, n * (m + 1) / setup.accumulation);
            examples::mlp_loss_grad<T>(setup.shape, data, params.data(), micro.data(), idx.data(), idx.size());
            for (std::size_t i = 0; i < grad.size(); ++i) grad[i] += micro[i];
        }
        if (setup.accumulation > 1)
            for (T &g : grad) g *= T(1.0 / setup.accumulation);
        clip(grad, setup.max_grad_norm);
        std::size_t offset = 0;
        std::vector<double> stats(tensors.size() * std::max(1, opt->tensor_stats()), 0.0);
        auto segment = [&](int t) {
            Segment<T> s;
            s.param = params.data() + offset;
            s.grad = grad.data() + offset;
            for (int k = 0; k < opt->state_slots(); ++k) s.state[k] = state[k].data() + offset;
            s.count = tensors[t].second;
            s.tensor = t;
            s.stats[0] = std::size_t(t) * std::size_t(std::max(1, opt->tensor_stats()));
            return s;
        };
        if (opt->tensor_stats() > 0) {
            offset = 0;
            for (int t = 0; t < int(tensors.size()); ++t) {
                opt->begin_step(segment(t), step, stats.data());
                offset += tensors[t].second;
            }
        }
        offset = 0;
        for (int t = 0; t < int(tensors.size()); ++t) {
            opt->apply(segment(t), step, opt->tensor_stats() > 0 ? stats.data() : nullptr);
            offset += tensors[t].second;
        }
    }
    return params;
}

template <typename T>
std::vector<T> train_distributed(const TrainingSetup &setup, int world_size, const ShardingOptions &options) {
    const auto data = examples::make_blobs(setup.samples, setup.shape.inputs, setup.shape.classes);
    const auto init = examples::mlp_init<T>(setup.shape);
    const auto tensors = examples::mlp_tensors(setup.shape);
    std::vector<T> result;
    std::mutex result_mutex;
    run_inprocess(world_size, [&](Communicator &comm) {
        ParameterSet layout(dtype_of<T>::value);
        for (std::size_t t = 0; t < tensors.size(); ++t) {
            layout.add(tensors[t].first, tensors[t].second);
            if (t == 1) layout.end_bucket(); // one bucket (FSDP unit) per layer
        }
        ShardingOptions o = options;
        o.max_grad_norm = setup.max_grad_norm;
        o.gradient_accumulation_steps = setup.accumulation;
        auto opt = ShardedOptimizer::create(comm.shared_from_this(), layout, setup.optimizer, o, init.data());
        const int n_buckets = opt->layout().bucket_count();
        std::vector<std::size_t> packed_offset(n_buckets, 0); // where each bucket starts, packed
        for (int b = 1; b < n_buckets; ++b) packed_offset[b] = packed_offset[b - 1] + opt->layout().bucket(b - 1).count;
        std::vector<T> params(init.size()), grad(init.size());
        const std::int64_t n = std::int64_t(setup.samples), r = comm.rank(), w = comm.size();
        for (int step = 0; step < setup.steps; ++step) {
            for (int m = 0; m < setup.accumulation; ++m) {
                // Forward: gather each unit (FSDP) and read its parameters.
                for (int b = 0; b < n_buckets; ++b) {
                    std::memcpy(params.data() + packed_offset[b], opt->gather(b),
                                opt->layout().bucket(b).count * sizeof(T));
                    opt->release(b);
                }
                const std::int64_t mlo = n * m / setup.accumulation, mhi = n * (m + 1) / setup.accumulation;
                const BatchSlice slice = batch_slice(mlo, mhi - mlo, int(r), int(w));
                auto idx = slice.indices();
                std::fill(grad.begin(), grad.end(), T(0));
                if (!idx.empty()) examples::mlp_loss_grad<T>(setup.shape, data, params.data(), grad.data(), idx.data(), idx.size());
                const T weight = T(slice.weight);
                for (T &g : grad) g *= weight;
                // Backward order: last bucket first, each handed over as soon as it is ready.
                opt->zero_grad();
                for (int b = n_buckets - 1; b >= 0; --b) {
                    std::memcpy(opt->bucket_grad(b), grad.data() + packed_offset[b],
                                opt->layout().bucket(b).count * sizeof(T));
                    opt->grad_ready(b);
                }
                opt->step();
            }
        }
        std::vector<T> final_params(init.size());
        opt->get_parameters(final_params.data());
        if (comm.rank() == 0) {
            std::lock_guard<std::mutex> lock(result_mutex);
            result = final_params;
        }
    });
    return result;
}

template <typename T> double relative_error(const std::vector<T> &a, const std::vector<T> &b) {
    if (a.size() != b.size()) return INFINITY;
    double diff = 0, scale = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        diff = std::max(diff, std::abs(double(a[i]) - double(b[i])));
        scale = std::max(scale, std::abs(double(b[i])));
    }
    return scale == 0 ? diff : diff / scale;
}

template std::vector<float> train_single_process<float>(const TrainingSetup &);
template std::vector<double> train_single_process<double>(const TrainingSetup &);
template std::vector<float> train_distributed<float>(const TrainingSetup &, int, const ShardingOptions &);
template std::vector<double> train_distributed<double>(const TrainingSetup &, int, const ShardingOptions &);
template double relative_error<float>(const std::vector<float> &, const std::vector<float> &);
template double relative_error<double>(const std::vector<double> &, const std::vector<double> &);

} // namespace shardopt::testing

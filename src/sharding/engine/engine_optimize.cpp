// optimize(): the AiDotNet-style training loop over the step protocol. Each global batch is
// split into contiguous per-rank slices; each rank's mean gradient is weighted by its slice size
// so the average over ranks is exactly the full batch's mean gradient, whatever the split. The
// model callback works on host memory: parameters are copied out of the space for each call and
// its gradient copied into the buckets.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "../../training/epoch_order.hpp"
#include "../../training/epoch_progress.hpp"
#include "../../optim/vector_ops.hpp"
#include "shardopt/batch_split.hpp"
#include "shardopt/error.hpp"
#include "step_engine.hpp"

namespace shardopt::engine {

StepResult StepEngine::step_on_packed_gradient(const unsigned char *packed_grad) {
    zero_grad();
    std::size_t packed = 0;
    for (int b = 0; b < layout_.bucket_count(); ++b) {
        const std::size_t count = layout_.bucket(b).count;
        // The copy follows bucket_grad's clearing (on the compute stream for a device space).
        space_->copy_from_host(bucket_grad(b), packed_grad + packed * elem_, count * elem_);
        packed += count;
        grad_ready(b);
    }
    return step();
}

OptimizeResult StepEngine::optimize(const ModelFunction &model, const OptimizeOptions &o) {
    require(bool(model), ErrorCode::invalid_argument, "optimize: model function is null");
    require(o.num_samples > 0, ErrorCode::invalid_argument, "optimize: num_samples must be > 0");
    require(o.batch_size >= 0, ErrorCode::invalid_argument, "optimize: batch_size must be >= 0");
    require(o.epochs >= 1, ErrorCode::invalid_argument, "optimize: epochs must be >= 1");
    require(o.first_epoch >= 0, ErrorCode::invalid_argument, "optimize: first_epoch must be >= 0");
    require(o.start_iteration >= 0, ErrorCode::invalid_argument, "optimize: start_iteration must be >= 0");
    require(o.max_iterations >= 0 && o.patience >= 0 && o.min_delta >= 0.0, ErrorCode::invalid_argument,
            "optimize: max_iterations, patience and min_delta must be >= 0");
    const ParameterSet &layout = layout_;
    const int dp = grid_.data->size(), dp_rank = grid_.data->rank();
    const std::int64_t batch = o.batch_size == 0 ? o.num_samples : std::min(o.batch_size, o.num_samples);
    const std::size_t elem = layout.element_size(), n = layout.element_count();
    std::vector<unsigned char> params(n * elem), grads(n * elem);
    std::vector<std::int64_t> samples;

    training::EpochProgress progress(
        o, n * elem, [this](void *packed) { get_parameters(packed); },
        [this](bool vote) { return should_early_stop(vote); });
    OptimizeResult &result = progress.result();
    for (int epoch = 0; epoch < o.epochs; ++epoch) {
        const std::vector<std::int64_t> order = training::epoch_order(o.num_samples, o.shuffle, o.seed, o.first_epoch + epoch);
        double epoch_loss_sum = 0.0;
        std::int64_t epoch_samples = 0;
        bool hit_limit = false;
        for (std::int64_t start = 0; start < o.num_samples; start += batch) {
            const std::int64_t batch_n = std::min(batch, o.num_samples - start);
            if (result.iterations < o.start_iteration) { // done before the run was resumed
                ++result.iterations;
                if (o.max_iterations > 0 && result.iterations >= o.max_iterations) {
                    hit_limit = true;
                    break;
                }
                continue;
            }
            const BatchSlice slice = batch_slice(start, batch_n, dp_rank, dp);
            samples.resize(std::size_t(slice.size()));
            for (std::int64_t i = slice.begin; i < slice.end; ++i)
                samples[std::size_t(i - slice.begin)] = order[std::size_t(i)];

            get_parameters(params.data());
            std::memset(grads.data(), 0, grads.size());
            double local_loss = samples.empty() ? 0.0 : model(params.data(), grads.data(), samples.data(), samples.size());
            const double weight = slice.weight;
            if (weight != 1.0) scale(grads.data(), n, layout.dtype(), weight);
            local_loss *= weight;
            const StepResult stepped = step_on_packed_gradient(grads.data());
            if (o.after_step) o.after_step(stepped);
            const double batch_loss = space_->allreduce_scalar(*grid_.data, local_loss, ReduceOp::avg);
            // Every rank sees the same average: all stop together, instead of skipping steps forever.
            if (!std::isfinite(batch_loss))
                throw Error(ErrorCode::invalid_state,
                            "optimize: the loss is " + std::string(std::isnan(batch_loss) ? "NaN" : "infinite") +
                                " at epoch " + std::to_string(epoch + 1) + ", iteration " +
                                std::to_string(result.iterations + 1) + " (averaged over the data-parallel ranks)");
            epoch_loss_sum += batch_loss * double(batch_n);
            epoch_samples += batch_n;
            ++result.iterations;
            if (o.max_iterations > 0 && result.iterations >= o.max_iterations) {
                hit_limit = true;
                break;
            }
        }
        if (epoch_samples == 0) { // skipped whole: resumed after it
            if (hit_limit) break;
            continue;
        }
        if (progress.end_epoch(epoch_loss_sum / double(epoch_samples), hit_limit)) break;
    }
    return progress.finish();
}

} // namespace shardopt::engine

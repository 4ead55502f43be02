#include "step_loop.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "../optim/vector_ops.hpp"
#include "epoch_order.hpp"
#include "epoch_progress.hpp"
#include "shardopt/batch_split.hpp"
#include "shardopt/error.hpp"

namespace shardopt::training {

OptimizeResult step_loop(Trainee &trainee, const ModelFunction &model, const OptimizeOptions &o) {
    const ParameterSet &layout = trainee.layout();
    const CommunicatorPtr data = trainee.data_group();
    const int dp = data->size(), dp_rank = data->rank();
    const std::int64_t batch = o.batch_size == 0 ? o.num_samples : std::min(o.batch_size, o.num_samples);
    const std::size_t elem = layout.element_size(), n = layout.element_count();
    std::vector<unsigned char> params(n * elem), grads(n * elem);
    std::vector<std::int64_t> samples;

    EpochProgress progress(
        o, n * elem, [&trainee](void *packed) { trainee.get_parameters(packed); },
        [&trainee](bool vote) { return trainee.should_early_stop(vote); });
    OptimizeResult &result = progress.result();
    for (int epoch = 0; epoch < o.epochs; ++epoch) {
        const std::vector<std::int64_t> order = epoch_order(o.num_samples, o.shuffle, o.seed, o.first_epoch + epoch);
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

            trainee.get_parameters(params.data());
            std::memset(grads.data(), 0, grads.size());
            double local_loss = samples.empty() ? 0.0 : model(params.data(), grads.data(), samples.data(), samples.size());
            const double weight = slice.weight;
            if (weight != 1.0) scale(grads.data(), n, layout.dtype(), weight);
            local_loss *= weight;
            const StepResult stepped = trainee.step_on_packed_gradient(grads.data());
            if (o.after_step) o.after_step(stepped);
            const double batch_loss = trainee.allreduce_over_data(local_loss, ReduceOp::avg);
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

} // namespace shardopt::training

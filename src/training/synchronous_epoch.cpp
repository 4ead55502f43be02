#include "synchronous_epoch.hpp"

#include <algorithm>
#include <vector>

#include "trainer.hpp"
#include "shardopt/batch_split.hpp"

namespace shardopt::training {

EpochOutcome run_synchronous_epoch(const EpochPlan &plan, Trainee &trainee,
                                   const std::function<StepResult(const void *packed_grad)> &step_on) {
    const CommunicatorPtr data = trainee.data_group();
    BatchMemory &memory = *plan.memory;
    const std::int64_t total = std::int64_t(plan.order->size());
    std::vector<std::int64_t> samples;
    EpochOutcome out;
    double loss_sum = 0.0;
    std::int64_t loss_samples = 0;
    for (std::int64_t k = plan.first_batch; k < plan.end_batch; ++k) {
        const std::int64_t start = k * plan.batch, batch_n = std::min(plan.batch, total - start);
        const std::int64_t step = plan.steps_before + k;
        const BatchSlice slice = batch_slice(start, batch_n, data->rank(), data->size());
        samples.resize(std::size_t(slice.size()));
        for (std::int64_t i = slice.begin; i < slice.end; ++i)
            samples[std::size_t(i - slice.begin)] = (*plan.order)[std::size_t(i)];
        if (k > plan.first_batch && plan.before_step) plan.before_step(step);

        memory.read_parameters();
        memory.clear_grad();
        double local_loss = 0.0;
        if (!samples.empty()) {
            Batch b;
            memory.describe(b);
            b.params = memory.params();
            b.grad = memory.grad();
            b.samples = samples.data();
            b.sample_count = samples.size();
            b.epoch = plan.epoch;
            b.step = step;
            local_loss = (*plan.model)(b);
        }
        if (slice.weight != 1.0) memory.scale_grad(slice.weight);
        local_loss *= slice.weight;
        const StepResult stepped = step_on(memory.grad());
        if (plan.after_step && *plan.after_step) (*plan.after_step)(stepped);
        const double batch_loss = trainee.allreduce_over_data(local_loss, ReduceOp::avg);
        // Every rank sees the same average: all stop together, instead of skipping steps forever.
        require_finite_loss(batch_loss, Dataset::training, plan.epoch, step, "the data-parallel ranks");
        loss_sum += batch_loss * double(batch_n);
        loss_samples += batch_n;
        ++out.batches;
    }
    if (loss_samples > 0) out.mean_loss = loss_sum / double(loss_samples);
    return out;
}

} // namespace shardopt::training

// AsyncSgdOptimizer::optimize: the training loop of the other strategies (epochs of batches split
// across the ranks, each rank's mean gradient weighted by its slice, early stopping voted across
// ranks), with each epoch one asynchronous session: this rank's worker runs its steps as the
// clock keeper hands it versions, its step labelled t on its slice of the epoch's batch t.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "../optim/vector_ops.hpp"
#include "../training/epoch_order.hpp"
#include "../training/epoch_progress.hpp"
#include "../training/optimize_options.hpp"
#include "async_state.hpp"
#include "session.hpp"
#include "shardopt/batch_split.hpp"
#include "shardopt/error.hpp"

namespace shardopt {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The packed gradient into the full padded buffer (padding left 0).
void scatter_packed(const ParameterSet &layout, const unsigned char *packed, unsigned char *padded) {
    const std::size_t elem = layout.element_size();
    std::size_t in = 0;
    for (const auto &b : layout.buckets()) {
        std::memcpy(padded + b.offset * elem, packed + in * elem, b.count * elem);
        in += b.count;
    }
}

} // namespace

OptimizeResult AsyncSgdOptimizer::optimize(const ModelFunction &model, const OptimizeOptions &options) {
    training::check_optimize_options(model, options);
    return state_->optimize(model, options);
}

OptimizeResult AsyncSgdOptimizer::State::optimize(const ModelFunction &model, const OptimizeOptions &o) {
    State &s = *this;
    const int ranks = s.size(), rank = s.rank();
    const ParameterSet &layout = s.layout;
    const std::int64_t batch = o.batch_size == 0 ? o.num_samples : std::min(o.batch_size, o.num_samples);
    const std::size_t elem = layout.element_size(), n = layout.element_count();
    std::vector<unsigned char> params(n * elem), grads(n * elem);
    std::vector<std::int64_t> samples;

    const auto started = Clock::now();
    AsyncSgdStats stats;
    training::EpochProgress progress(
        o, n * elem, [&s](void *packed) { s.view_to_packed(packed); },
        [this](bool vote) { return early_stop_vote(vote); });
    OptimizeResult &result = progress.result();
    for (int epoch = 0; epoch < o.epochs; ++epoch) {
        const std::vector<std::int64_t> order = training::epoch_order(o.num_samples, o.shuffle, o.seed, o.first_epoch + epoch);
        // The epoch's clocks: one per batch, as far as max_iterations allows.
        std::vector<std::int64_t> clock_samples;
        for (std::int64_t start = 0; start < o.num_samples; start += batch) {
            if (o.max_iterations > 0 && result.iterations + std::int64_t(clock_samples.size()) >= o.max_iterations) break;
            clock_samples.push_back(std::min(batch, o.num_samples - start));
        }
        const bool hit_limit =
            o.max_iterations > 0 && result.iterations + std::int64_t(clock_samples.size()) >= o.max_iterations;

        async::Session session(s, clock_samples, epoch + 1);
        async::Session::Handed handed; // the version this rank's worker computes on
        std::int64_t applied = 0;
        try {
            for (;;) {
                // The step labelled handed.label, on this rank's slice of batch handed.label.
                const std::int64_t start = handed.label * batch;
                const std::int64_t batch_n = std::min(batch, o.num_samples - start);
                const BatchSlice slice = batch_slice(start, batch_n, rank, ranks);
                samples.resize(std::size_t(slice.size()));
                for (std::int64_t i = slice.begin; i < slice.end; ++i)
                    samples[std::size_t(i - slice.begin)] = order[std::size_t(i)];
                s.view_to_packed(params.data());
                std::memset(grads.data(), 0, grads.size());
                auto t0 = Clock::now();
                double loss = samples.empty() ? 0.0 : model(params.data(), grads.data(), samples.data(), samples.size());
                stats.model_seconds += seconds_since(t0);
                if (slice.weight != 1.0) scale(grads.data(), n, layout.dtype(), slice.weight);
                loss *= slice.weight;
                scatter_packed(layout, grads.data(), s.gradient.data());
                session.push(handed.label, handed.version, loss, s.gradient.data());
                ++stats.steps;
                t0 = Clock::now();
                const async::Session::Handed next = session.receive();
                stats.wait_seconds += seconds_since(t0);
                if (next.label >= session.clocks()) {
                    handed = next;
                    break;
                }
                stats.max_own_lead = std::max(stats.max_own_lead, int(next.label - next.version));
                handed = next;
            }
            applied = session.finish();
        } catch (...) {
            session.fail(); // rethrows this rank's first failure of the session
        }
        require(applied == session.clocks(), ErrorCode::internal,
                "async SGD: the session applied " + std::to_string(applied) + " of " +
                    std::to_string(session.clocks()) + " updates");
        s.step_count += applied;
        const async::ReplyHeader &account = handed.account;
        stats.updates += applied;
        stats.late_gradients += account.late_gradients;
        stats.skipped_clocks += account.skipped_clocks;
        stats.max_staleness = std::max(stats.max_staleness, int(account.max_staleness));
        stats.max_lead = std::max(stats.max_lead, int(account.max_lead));
        result.iterations += applied;

        if (progress.end_epoch(account.epoch_loss, hit_limit)) break;
    }
    OptimizeResult finished = progress.finish();
    stats.seconds = seconds_since(started);
    s.stats = stats;
    return finished;
}

} // namespace shardopt

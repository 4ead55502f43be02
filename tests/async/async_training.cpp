#include "async_training.hpp"

#include <chrono>
#include <cstring>
#include <mutex>
#include <numeric>
#include <thread>

#include "mlp.hpp"
#include "shardopt/error.hpp"
#include "shardopt/inprocess.hpp"

namespace shardopt::testing {
namespace {

using Clock = std::chrono::steady_clock;

template <typename T> AsyncTrainingResult train_typed(Communicator &comm, const AsyncTraining &setup) {
    const examples::MlpShape shape{16, 64, 4};
    const auto data = examples::make_blobs(std::size_t(setup.samples), shape.inputs, shape.classes);
    const auto init = examples::mlp_init<T>(shape);
    ParameterSet layout(dtype_of<T>::value);
    int t = 0;
    for (auto &[name, count] : examples::mlp_tensors(shape)) {
        layout.add(name, count);
        if (++t == 2) layout.end_bucket(); // one bucket per layer
    }
    ShardingOptions options;
    options.strategy = setup.strategy;
    options.async_staleness = setup.strategy == Strategy::async_sgd ? setup.staleness : 0;
    OptimizerOptions optimizer = OptimizerOptions::defaults(setup.optimizer);
    optimizer.lr = setup.lr;
    auto opt = ShardedOptimizer::create(comm.shared_from_this(), layout, optimizer, options, init.data());

    AsyncTrainingResult r;
    const bool slow = comm.rank() == setup.slow_rank;
    ModelFunction model = [&](const void *params, void *grad, const std::int64_t *samples, std::size_t n) {
        const auto t0 = Clock::now();
        double loss = examples::mlp_loss_grad<T>(shape, data, static_cast<const T *>(params), static_cast<T *>(grad),
                                                 samples, n);
        if (setup.after_model) loss = setup.after_model(comm.rank(), r.model_calls, loss);
        ++r.model_calls;
        if (setup.compute_ms > 0)
            std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(setup.compute_ms));
        if (slow) { // a straggler: (factor - 1) times its own compute time more
            const double took = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
            const double extra = std::max((setup.slow_factor - 1.0) * took, setup.slow_min_ms);
            std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(extra));
        }
        return loss;
    };
    OptimizeOptions o;
    o.num_samples = setup.samples;
    o.batch_size = setup.batch;
    o.epochs = setup.epochs;
    o.shuffle = setup.shuffle;
    o.seed = 42;
    const auto t0 = Clock::now();
    r.optimize = opt->optimize(model, o);
    r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    if (opt->async_sgd()) r.stats = opt->async_sgd()->stats();

    std::vector<T> params(init.size()), grad(init.size());
    opt->get_parameters(params.data());
    r.params.assign(params.begin(), params.end());
    r.bytes.resize(params.size() * sizeof(T));
    std::memcpy(r.bytes.data(), params.data(), r.bytes.size());
    std::vector<std::int64_t> all(std::size_t(setup.samples));
    std::iota(all.begin(), all.end(), std::int64_t(0));
    r.final_loss = examples::mlp_loss_grad<T>(shape, data, params.data(), grad.data(), all.data(), all.size());
    return r;
}

} // namespace

AsyncTrainingResult train_mlp(Communicator &comm, const AsyncTraining &setup) {
    if (setup.timeout.count() > 0) comm.set_timeout(setup.timeout);
    require(setup.dtype == DType::f32 || setup.dtype == DType::f64, ErrorCode::invalid_argument,
            "train_mlp: f32 or f64");
    return setup.dtype == DType::f32 ? train_typed<float>(comm, setup) : train_typed<double>(comm, setup);
}

std::vector<AsyncTrainingResult> train_mlp_inprocess(int ranks, const AsyncTraining &setup) {
    std::vector<AsyncTrainingResult> results(static_cast<std::size_t>(ranks));
    run_inprocess(ranks, [&](Communicator &comm) { results[std::size_t(comm.rank())] = train_mlp(comm, setup); });
    return results;
}

} // namespace shardopt::testing

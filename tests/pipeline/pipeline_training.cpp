#include "pipeline_training.hpp"

#include <mutex>

#include "shardopt/inprocess.hpp"

namespace shardopt::testing {

std::vector<double> train_pipeline(const TrainingSetup &setup, const PipelineSetup &pipe, const StageHook &before,
                                   const StageHook &after) {
    const auto data = examples::make_blobs(setup.samples, setup.shape.inputs, setup.shape.classes);
    const auto init = examples::mlp_init<double>(setup.shape);
    const int v = pipe.pipeline.virtual_stages;
    const auto bounds = examples::mlp_chunk_bounds(pipe.pp * v);
    std::vector<double> full(init.size());
    std::mutex m;
    run_inprocess(pipe.pp * pipe.dp, [&](Communicator &comm) {
        ShardingOptions o;
        o.strategy = Strategy::hybrid;
        o.pipeline_parallel_size = pipe.pp;
        o.data_parallel_size = pipe.dp;
        o.hybrid_data_strategy = pipe.inner;
        o.max_grad_norm = setup.max_grad_norm;
        const int pp_rank = comm.rank() / pipe.dp, dp_rank = comm.rank() % pipe.dp; // hybrid_grid.hpp's order
        examples::MlpPipelineStage stage(setup.shape, data, bounds, pipe.pp, pp_rank);
        const auto mine = stage.slice(init);
        auto opt = ShardedOptimizer::create(comm.shared_from_this(), stage.layout(DType::f64), setup.optimizer, o,
                                            mine.data());
        if (before) before(*opt, stage);
        PipelineRunner runner(*opt, stage, pipe.pipeline);
        const int micro = runner.shape().micro_batches;
        for (int step = 0; step < setup.steps; ++step) {
            stage.set_batch(0, std::int64_t(setup.samples), micro, dp_rank, pipe.dp);
            const auto r = runner.run_batch();
            if (!r.step.applied) throw Error(ErrorCode::internal, "a batch ended without an optimizer update");
        }
        std::vector<double> params(mine.size());
        opt->get_parameters(params.data());
        if (after) after(*opt, stage);
        if (dp_rank == 0) {
            std::lock_guard<std::mutex> lock(m);
            stage.unslice(params, full);
        }
    });
    return full;
}

} // namespace shardopt::testing

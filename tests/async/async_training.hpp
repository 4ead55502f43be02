// The demo MLP trained through optimize() on one rank of a group, by DDP or by asynchronous SGD,
// optionally with this rank slowed down: what the asynchronous SGD tests compare (in-process and
// over UCX processes).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "shardopt/async_sgd.hpp"
#include "shardopt/comm.hpp"
#include "shardopt/sharded_optimizer.hpp"

namespace shardopt::testing {

struct AsyncTraining {
    Strategy strategy = Strategy::ddp; // ddp or async_sgd
    int staleness = 0;
    OptimizerKind optimizer = OptimizerKind::adam;
    double lr = 3e-3;
    DType dtype = DType::f32;
    std::int64_t samples = 512;
    std::int64_t batch = 64;
    int epochs = 3;
    bool shuffle = true;
    double compute_ms = 0.0;    // every model callback sleeps this long (work of a device, CPU left free)
    int slow_rank = -1;         // this rank's model callback is made `slow_factor` times slower
    double slow_factor = 3.0;   // by sleeping (factor - 1) x its own time, and at least...
    double slow_min_ms = 0.0;   // ... this many milliseconds per call
    Communicator::Duration timeout{0}; // the communicator's timeout when > 0
    // Called in the model callback of every rank before it computes (tests inject failures); a
    // value it returns replaces the loss.
    std::function<double(int rank, std::int64_t call, double loss)> after_model;
};

struct AsyncTrainingResult {
    std::vector<double> params; // the final packed parameters, as doubles
    std::vector<unsigned char> bytes; // ... as the optimizer holds them (bitwise comparisons)
    OptimizeResult optimize;
    AsyncSgdStats stats;        // async_sgd only
    double final_loss = 0.0;    // the loss of the final parameters over the whole data set
    std::int64_t model_calls = 0;
    double seconds = 0.0;       // inside optimize()
};

// This rank's part (collective over comm).
AsyncTrainingResult train_mlp(Communicator &comm, const AsyncTraining &setup);

// Runs `ranks` in-process ranks; the result of each rank, by rank.
std::vector<AsyncTrainingResult> train_mlp_inprocess(int ranks, const AsyncTraining &setup);

} // namespace shardopt::testing

// Training through ShardedOptimizer for the engine tests of the rules whose state or statistics
// cross shard boundaries (low-bit state, Adafactor, Muon): one step of the bucket protocol, and
// rank 0's parameters after a run, optionally from and to a checkpoint.
#pragma once

#include <cmath>
#include <cstring>
#include <mutex>
#include <vector>

#include "sharding_test_support.hpp"
#include "shardopt/inprocess.hpp"

namespace shardopt::testing {

// Whose gradients a step uses.
enum class Gradients {
    per_rank, // each rank its own: the average is what every layout steps on
    // rank 0's on every rank, rounded to multiples of 2^-12, so that any world size averages them
    // exactly and runs at different world sizes compare bit for bit; negated in every other run
    // of 300 elements, so that state blocks have largest elements of either sign
    same_on_every_rank,
};

// One step: every bucket's gradient from the packed parameters (FSDP units gathered around it).
inline void train_step(ShardedOptimizer &opt, int rank, int step_number, Gradients gradients) {
    const ParameterSet &layout = opt.layout();
    std::vector<float> packed(layout.element_count());
    opt.get_parameters(packed.data());
    const bool same = gradients == Gradients::same_on_every_rank;
    opt.zero_grad();
    for (int b = layout.bucket_count() - 1; b >= 0; --b) {
        opt.gather(b);
        const auto &bl = layout.bucket(b);
        std::size_t at = 0;
        for (int t = 0; t < bl.first_tensor; ++t) at += layout.tensor(t).count;
        for (int t = bl.first_tensor; t < bl.first_tensor + bl.tensor_count; ++t) {
            auto *g = static_cast<float *>(opt.grad(t));
            for (std::size_t i = 0; i < layout.tensor(t).count; ++i) {
                g[i] = gradient(packed[at + i], at + i, same ? 0 : rank, step_number);
                if (same) g[i] = std::ldexp(std::round(std::ldexp(g[i], 12)), -12) * (((at + i) / 300) % 2 ? -1.0f : 1.0f);
            }
            at += layout.tensor(t).count;
        }
        opt.grad_ready(b);
        opt.release(b);
    }
    opt.step();
}

struct TrainRun {
    ParameterSet (*layout)(); // built anew on every rank
    OptimizerOptions optimizer;
    ShardingOptions sharding;
    int ranks = 1;
    Gradients gradients = Gradients::per_rank;
    int first = 1, last = 4;                       // the steps run, counted from 1
    const std::vector<unsigned char> *load = nullptr; // a checkpoint to start from
    std::vector<unsigned char> *save = nullptr;       // where rank 0's serialized state goes at the end
};

// Rank 0's parameters after the run's steps, from testing::initial_values.
inline std::vector<float> train_rank0(const TrainRun &run) {
    ParameterSet probe = run.layout();
    probe.plan(1);
    const std::vector<float> init = initial_values(probe.element_count());
    std::vector<float> result;
    std::mutex &mutex = assertion_mutex();
    run_inprocess(run.ranks, [&](Communicator &comm) {
        auto opt = ShardedOptimizer::create(comm.shared_from_this(), run.layout(), run.optimizer, run.sharding,
                                            init.data());
        if (run.load) opt->deserialize(run.load->data(), run.load->size());
        for (int k = run.first; k <= run.last; ++k) train_step(*opt, comm.rank(), k, run.gradients);
        std::vector<float> packed(opt->layout().element_count());
        opt->get_parameters(packed.data());
        std::vector<unsigned char> bytes;
        if (run.save) bytes = opt->serialize();
        if (comm.rank() == 0) {
            std::lock_guard<std::mutex> lock(mutex);
            result = std::move(packed);
            if (run.save) *run.save = std::move(bytes);
        }
    });
    return result;
}

inline bool same_bits(const std::vector<float> &a, const std::vector<float> &b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

} // namespace shardopt::testing

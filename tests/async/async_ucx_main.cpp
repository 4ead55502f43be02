// Asynchronous SGD over UCX, one rank per process (launched by tools/shardopt-run).
//
//   async_ucx_main equal     DDP, then async_sgd at staleness 0, for SGD in f64 and Adam in f32:
//                            every rank must end with DDP's parameters bit for bit; then staleness
//                            2 with rank 1 slowed: every rank ends with the same parameters, the
//                            bound held. Prints "OK ..." per rank.
//   async_ucx_main kill V    async_sgd at staleness 2; rank V SIGKILLs itself in its 6th model
//                            callback. Every other rank must fail with peer_lost naming rank V
//                            within twice the timeout of the start; prints "OK <seconds> <message>".
#include <csignal>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "async_training.hpp"
#include "shardopt/error.hpp"
#include "shardopt/ucx.hpp"

using namespace shardopt;
using namespace shardopt::testing;

namespace {

// The same bytes on every rank: compared through a gather to rank 0's.
bool same_on_every_rank(Communicator &comm, const std::vector<unsigned char> &bytes) {
    std::vector<unsigned char> first = bytes;
    comm.broadcast(first.data(), first.size(), DType::u8, 0);
    double differs = first == bytes ? 0.0 : 1.0;
    comm.allreduce(&differs, &differs, 1, DType::f64, ReduceOp::max);
    return differs == 0.0;
}

int equal_mode(Communicator &comm) {
    bool ok = true;
    for (auto [kind, dtype] : {std::pair{OptimizerKind::sgd, DType::f64}, std::pair{OptimizerKind::adam, DType::f32}}) {
        AsyncTraining t;
        t.optimizer = kind;
        t.dtype = dtype;
        t.lr = kind == OptimizerKind::sgd ? 0.1 : 3e-3;
        t.strategy = Strategy::ddp;
        const AsyncTrainingResult ddp = train_mlp(comm, t);
        t.strategy = Strategy::async_sgd;
        const AsyncTrainingResult async = train_mlp(comm, t);
        const bool same = async.bytes == ddp.bytes && async.optimize.loss_history == ddp.optimize.loss_history;
        std::printf("%s %s %s: staleness 0 %s DDP bit for bit (final loss %.6f)\n", same ? "OK" : "BAD",
                    optimizer_kind_name(kind), dtype_name(dtype), same ? "equals" : "differs from", async.final_loss);
        ok = ok && same;
    }
    AsyncTraining t;
    t.strategy = Strategy::async_sgd;
    t.staleness = 2;
    t.slow_rank = 1;
    t.slow_factor = 5.0;
    t.slow_min_ms = 1.0;
    const AsyncTrainingResult r = train_mlp(comm, t);
    const bool agree = same_on_every_rank(comm, r.bytes);
    const bool bound = r.stats.max_staleness <= 2 && r.stats.max_lead <= 2 && r.stats.max_own_lead <= 2;
    const bool trained = r.optimize.loss_history.back() < r.optimize.loss_history.front();
    std::printf("%s staleness 2, rank 1 slowed: ranks agree %d, bound held %d (staleness %d, lead %d), trained %d, "
                "%lld late gradients, %lld clocks skipped\n",
                agree && bound && trained ? "OK" : "BAD", agree, bound, r.stats.max_staleness, r.stats.max_lead,
                trained, (long long)r.stats.late_gradients, (long long)r.stats.skipped_clocks);
    ok = ok && agree && bound && trained;
    return ok ? 0 : 1;
}

int kill_mode(Communicator &comm, int victim) {
    AsyncTraining t;
    t.strategy = Strategy::async_sgd;
    t.staleness = 2;
    t.epochs = 50; // far longer than the test lets it run
    t.compute_ms = 2.0;
    using Clock = std::chrono::steady_clock;
    t.after_model = [&](int rank, std::int64_t call, double loss) {
        if (call == 5 && rank == victim) raise(SIGKILL);
        return loss;
    };
    const Clock::time_point started = Clock::now(); // the kill comes a few steps (milliseconds) later
    try {
        train_mlp(comm, t);
    } catch (const Error &e) {
        const double secs = std::chrono::duration<double>(Clock::now() - started).count();
        const std::string what = e.what();
        const double limit = 2.0 * double(comm.timeout().count()) / 1000.0;
        if (e.code() == ErrorCode::peer_lost && what.find("rank " + std::to_string(victim)) != std::string::npos &&
            secs < limit) {
            std::printf("OK %.2f %s\n", secs, what.c_str());
            return 0;
        }
        std::printf("BAD after %.2f s (limit %.1f): %s: %s\n", secs, limit, error_code_name(e.code()), what.c_str());
        return 1;
    }
    std::printf("BAD: training ended although rank %d was killed\n", victim);
    return 1;
}

} // namespace

int main(int argc, char **argv) {
    try {
        auto comm = create_communicator_from_env("ucx");
        if (argc >= 2 && !std::strcmp(argv[1], "equal")) return equal_mode(*comm);
        if (argc >= 3 && !std::strcmp(argv[1], "kill")) return kill_mode(*comm, std::atoi(argv[2]));
        std::fprintf(stderr, "usage: %s equal | kill VICTIM\n", argv[0]);
        return 2;
    } catch (const std::exception &e) {
        std::printf("BAD: %s\n", e.what());
        return 1;
    }
}

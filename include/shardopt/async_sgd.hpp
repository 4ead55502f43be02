// AsyncSgdOptimizer: asynchronous data parallelism with bounded staleness (stale synchronous
// parallel) over a sharded parameter server: AiDotNet's AsyncSGDOptimizer(wrapped, config,
// allowStaleness), for real. docs/async_sgd.md has the same with pictures and figures.
//
// Roles. Every rank is a worker and a parameter server. Rank k owns shard k (chunk k of every
// bucket, as ZeRO cuts it): the master copy of those parameters and the base optimizer's state
// for them; it applies every update to them. Each worker keeps a full copy of the parameters (its
// view), computes gradients on it, pushes shard k of each gradient to owner k and receives new
// versions of every shard from the owners: point-to-point messages only, no collective and no
// barrier while training. Rank 0's server also keeps the clock: it decides which gradients each
// update holds and tells the other owners, so every shard goes through the same updates.
//
// Clocks. The parameters' version is the number of updates applied to them; update c (clock c)
// turns version c into c + 1, exactly once on every shard. Each step of a worker has a clock
// label t and computes on the newest version v its view holds. A worker's first step is labelled
// 0, each next one max(t + 1, v) (a worker that fell behind skips to the version it was handed,
// and skips the batches of the clocks it missed). The gradient of the step labelled t belongs to
// update t; one that arrives after update t was applied (a late gradient) joins the update in
// progress: every gradient is applied exactly once, none dropped, none twice. An update is the
// mean of its gradients, summed in (rank, label) order; its loss the mean of their losses.
//
// The bound s = allowStaleness. The staleness of a gradient is the clock it is applied in minus
// the version it was computed on.
//  (1) Read bound: a worker starts the step labelled t only with a view of version >= t - s; it
//      runs at most s clocks ahead of the parameters it computes on, and waits otherwise.
//  (2) Apply bound: update c waits for every worker still computing on version c - s or older,
//      so no gradient is applied more than s clocks after the version it was computed on.
//  (3) When update c goes: once every worker's clock-c gradient is in, or once some worker waits
//      for update c: it has run s clocks ahead of c (1), or made its last step of the session.
//      Update c waits for a worker's clock-c gradient only while every worker is within the
//      bound; when the fastest has run out of it, the workers still owing clock c are more than s
//      clocks behind the fastest, update c goes without them (as far as (2) allows), and their
//      gradients join a later update.
//  (4) The last update of a session (the epoch's last batch) waits for every gradient in flight.
// A worker handed a new version starts its next step at once (its gradient of the version just
// pushed may still be on its way): with s >= 1, computing overlaps the exchange.
//
// s = 0 is synchronous training: every update holds one gradient of every rank, computed on the
// version it is applied to, summed in rank order and divided by the world size, exactly as DDP's
// allreduce(avg) does: the parameters equal DDP's bit for bit (in-process and UCX on one host,
// where DDP's reduction runs in rank order too). With a rank k times slower than the others and
// s >= k, the others keep their own pace: update c goes when they reach the bound, the slow
// rank's gradients arrive late and join later updates, each at most s clocks stale.
//
// Training goes through optimize() (the ModelFunction of ShardedOptimizer::optimize). Each epoch
// is a session: rank 0's worker and every server start threads of their own, the step labelled
// t computes on this rank's slice of the epoch's batch t (DDP's iteration t), and the session ends
// once every worker holds the epoch's last version. Between sessions nothing is in flight: the
// parameters, checkpoints, state synchronization and early-stopping votes work as for the other
// strategies. Errors: a failure anywhere (a lost peer, a timeout, a failing model callback, a
// non-finite loss) aborts the optimizer's communicators on every rank, which then report it,
// peer_lost naming the lost rank. Every blocking wait is bounded: rank 0 waits for each worker's
// next gradient up to the communicator's timeout (a silent worker is reported, named, by rank 0),
// what waits on rank 0's decisions up to twice that.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "shardopt/comm.hpp"
#include "shardopt/optim.hpp"
#include "shardopt/params.hpp"
#include "shardopt/sharded_optimizer.hpp"

namespace shardopt {

// What the last optimize() call saw. Clock counts are over all its epochs.
struct AsyncSgdStats {
    std::int64_t updates = 0;       // clocks applied
    std::int64_t steps = 0;         // gradients this rank's worker computed
    std::int64_t late_gradients = 0; // gradients applied after their own clock (every rank's)
    std::int64_t skipped_clocks = 0; // clocks a worker jumped over, summed over workers
    // Largest staleness of any gradient applied (clock applied - version computed on), and the
    // largest lead of any step (its label - the version it computed on): both <= staleness.
    int max_staleness = 0;
    int max_lead = 0;
    int max_own_lead = 0; // the largest lead of this rank's steps, as its worker saw them
    double seconds = 0.0;        // this rank's worker, inside optimize()
    double model_seconds = 0.0;  // ... inside the model callback
    double wait_seconds = 0.0;   // ... waiting for parameters
    double steps_per_second() const { return seconds > 0.0 ? double(steps) / seconds : 0.0; }
};

class AsyncSgdOptimizer {
  public:
    // Collective over comm. `sharding` gives update_threads and broadcast_initial; its strategy is
    // taken as async_sgd and every option async SGD has no use for must keep its default
    // (Error(unsupported) naming it): host memory, no compression, no clipping, no gradient
    // accumulation. allow_staleness >= 0. LAMB is refused on more than one rank (its trust ratio
    // needs whole-tensor norms every update). Ranks whose options or layouts differ fail, every
    // one of them, with Error(mismatch). `initial` as ShardedOptimizer::create.
    static std::unique_ptr<AsyncSgdOptimizer> create(CommunicatorPtr comm, ParameterSet layout,
                                                     const OptimizerOptions &optimizer, int allow_staleness,
                                                     const ShardingOptions &sharding = {},
                                                     const void *initial = nullptr);
    ~AsyncSgdOptimizer();
    AsyncSgdOptimizer(const AsyncSgdOptimizer &) = delete;
    AsyncSgdOptimizer &operator=(const AsyncSgdOptimizer &) = delete;

    int rank() const noexcept;
    int world_size() const noexcept;
    int staleness() const noexcept;
    // strategy async_sgd, async_staleness = staleness().
    const ShardingOptions &options() const noexcept;
    const ParameterSet &layout() const noexcept;
    const OptimizerOptions &optimizer_options() const noexcept;
    void set_learning_rate(double lr);
    std::int64_t step_count() const noexcept; // clocks applied so far
    Communicator &communicator() noexcept;

    // This rank's view: the full padded flat buffer (between optimize() calls, the parameters
    // every rank holds).
    void *parameters();
    void get_parameters(void *packed);
    // Every rank the same values (not collective).
    void set_parameters(const void *packed);

    // train() (shardopt/training.hpp) over asynchronous epochs; ShardedOptimizer's optimize and
    // train reach it.
    TrainingResult train(const BatchFunction &model, const TrainingOptions &options);
    const AsyncSgdStats &stats() const noexcept;

    // As ShardedOptimizer's (collective over the world).
    void synchronize_optimizer_state();
    bool should_early_stop(bool local_vote);
    MemoryStats memory_stats() const;
    std::uint64_t bytes_sent() const;
    void save(const std::string &dir, CheckpointForm form = CheckpointForm::sharded);
    void load(const std::string &dir);
    std::vector<unsigned char> serialize();
    void serialize(const std::function<void(const void *, std::size_t)> &write); // ShardedOptimizer's stream form
    void deserialize(const void *data, std::size_t size);

    struct State; // src/async/async_state.hpp

  private:
    friend class AsyncSgdBackend; // ShardedOptimizer's backend for async_sgd (src/async/async_sgd_backend.cpp)
    explicit AsyncSgdOptimizer(std::unique_ptr<State> state);
    std::unique_ptr<State> state_;
};

} // namespace shardopt

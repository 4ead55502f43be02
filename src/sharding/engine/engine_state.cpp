// The engine's checkpoints and state synchronization. The checkpoint operations
// (src/checkpoint/checkpoint_target.hpp) run over a view of the engine as host bytes: the
// parameters where they are (host memory) or copied from the space, each state slot read span by
// span from the update's rules into one buffer laid out as the parameters are. A load stages into
// such buffers and commits them (parameters, state, the rules' step counts) only once every rank
// has validated everything. The operations' own collectives run on host buffers (HostComms).
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>

#include "../../checkpoint/async_save.hpp"
#include "../../checkpoint/checkpoint_target.hpp"
#include "../placement.hpp"
#include "rank_agreement.hpp"
#include "step_engine.hpp"
#include "shardopt/error.hpp"

namespace shardopt::engine {
namespace {

// Throws Error(mismatch) on every rank of `group` when they disagree on the step count, layout,
// optimizer kind or learning rate.
void check_state_agreement(Communicator &group, std::int64_t step_count, const ParameterSet &layout,
                           const OptimizerOptions &opts) {
    require_agreement(group,
                      {fact("the step count", step_count),
                       fact("the parameter layout", std::int64_t(layout.fingerprint() >> 1)),
                       fact("the optimizer kind", std::int64_t(opts.kind)),
                       fact("the learning rate", std::int64_t(std::llround(opts.lr * 1e12)))},
                      "synchronize_optimizer_state");
}

// What makes replicated data identical: for each part (k < 0 the parameters, k >= 0 state slot
// k) held replicated, in order, the communicator to make it identical over and how (LocalSGD
// averages, its replicas drift by design; the others take rank 0's copy).
enum class SyncOp { average, broadcast_from_0 };
void for_each_replicated_part(const StrategyPlan &plan, const HybridGrid &grid, int state_slots,
                              const std::function<void(int part, Communicator &comm, SyncOp op)> &fn) {
    Communicator &group = *grid.shard;
    if (!plan.reduce_grads()) {
        for (int k = -1; k < state_slots; ++k) fn(k, group, SyncOp::average);
        return;
    }
    if (!plan.params_sharded()) fn(-1, group, SyncOp::broadcast_from_0);
    if (!plan.state_sharded())
        for (int k = 0; k < state_slots; ++k) fn(k, group, SyncOp::broadcast_from_0);
    if (grid.replica) { // HSDP: shards are replicated across groups
        if (plan.params_sharded()) fn(-1, *grid.replica, SyncOp::broadcast_from_0);
        for (int k = 0; k < state_slots; ++k) fn(k, *grid.replica, SyncOp::broadcast_from_0);
    }
}

} // namespace

class StepEngine::CheckpointView final : public checkpoint::CheckpointTarget {
  public:
    explicit CheckpointView(StepEngine &engine)
        : e_(engine), placement_(placement_of(engine.plan_, engine.grid_)),
          state_(std::size_t(engine.update_->state_slots())) {
        e_.params_->wait_gathers(); // the parameters they write are the ones saved or replaced
    }

    Communicator &world() override { return e_.host_comms_.of(*e_.grid_.world); }
    const ParameterSet &layout() const override { return e_.layout_; }
    const OptimizerOptions &optimizer_options() const override { return e_.optimizer_; }
    int state_slots() const override { return e_.update_->state_slots(); }
    const ShardingOptions &sharding() const override { return e_.options_; }
    std::int64_t step_count() const override { return e_.step_count_; }
    const checkpoint::Placement &placement() const override { return placement_; }
    int micro_step() const override { return e_.grads_->micro_step(); }
    const std::vector<OwnedSegment> &chunk_segments() const override { return e_.chunks_; }

    const unsigned char *host_part(int k) override {
        if (k < 0) {
            if (e_.params_->on_host()) return e_.params_->data();
            if (params_.empty()) {
                params_.resize(e_.params_->bytes());
                e_.space_->copy_to_host(params_.data(), e_.params_->data(), params_.size());
            }
            return params_.data();
        }
        std::vector<unsigned char> &mirror = state_.at(std::size_t(k));
        if (mirror.empty()) mirror = e_.update_->state_to_host(k);
        return mirror.data();
    }

    void copy_part(int k, std::size_t first, std::size_t count, void *dst) override {
        const std::size_t elem = e_.layout_.element_size();
        if (count == 0) return;
        if (k >= 0) return e_.update_->read_state_range(k, first, count, static_cast<unsigned char *>(dst));
        if (!params_.empty()) { // host_part(-1) made a copy already
            std::memcpy(dst, params_.data() + first * elem, count * elem);
            return;
        }
        if (e_.params_->on_host()) std::memcpy(dst, e_.params_->data() + first * elem, count * elem);
        else e_.space_->copy_to_host(dst, e_.params_->data() + first * elem, count * elem);
    }

    void gather_packed(int k, void *packed) override {
        if (k < 0) return e_.get_parameters(packed); // through the space's memory
        shardopt::gather_packed(e_.layout_, e_.plan_.state_sharded() ? &e_.host_comms_.of(*e_.grid_.shard) : nullptr,
                                host_part(k), packed);
    }

    std::vector<unsigned char> rank_state() override { return e_.reduction_->rank_state(); }

    void commit(const std::vector<unsigned char> &params, const std::vector<std::vector<unsigned char>> &state,
                std::int64_t step_count, double lr, const std::vector<unsigned char> *rank_state) override {
        e_.params_->release_all_units(); // their contents are about to go stale
        require(params.size() == e_.params_->bytes(), ErrorCode::invalid_state,
                "checkpoint: " + std::to_string(params.size()) + " parameter bytes staged for a buffer of " +
                    std::to_string(e_.params_->bytes()));
        e_.write_params(params.data());
        for (int k = 0; k < e_.update_->state_slots(); ++k) e_.update_->state_from_host(k, state[std::size_t(k)].data());
        // The rules' bias corrections count from the restored step.
        e_.update_->set_step_count(step_count);
        e_.step_count_ = step_count;
        e_.set_learning_rate(lr);
        e_.reduction_->restore_rank_state(rank_state);
        params_.clear();
        for (auto &mirror : state_) mirror.clear();
    }

  private:
    StepEngine &e_;
    const checkpoint::Placement placement_;
    std::vector<unsigned char> params_;              // host_part(-1), once asked for
    std::vector<std::vector<unsigned char>> state_; // host_part(k), once asked for
};

void StepEngine::save(const std::string &dir, CheckpointForm form) {
    CheckpointView view(*this);
    checkpoint::save(view, dir, form);
}

std::unique_ptr<AsyncCheckpoint> StepEngine::save_async(const std::string &dir) {
    const auto start = std::chrono::steady_clock::now();
    CheckpointView view(*this);
    std::unique_ptr<checkpoint::ShardedSave> save = checkpoint::begin_sharded_save(view, dir, true);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return start_async_save(std::move(save), view.world(), [this] { params_->wait_gathers(); }, seconds);
}

void StepEngine::load(const std::string &dir) {
    CheckpointView view(*this);
    checkpoint::load(view, dir, nullptr, 0);
}

void StepEngine::serialize(const ShardedOptimizer::ByteWriter &write) {
    CheckpointView view(*this);
    checkpoint::FunctionSink sink(write);
    checkpoint::serialize(view, write ? &sink : nullptr);
}

std::vector<unsigned char> StepEngine::serialize() {
    CheckpointView view(*this);
    return checkpoint::serialize(view);
}

void StepEngine::deserialize(const void *data, std::size_t size) {
    CheckpointView view(*this);
    checkpoint::deserialize(view, data, size);
}

void StepEngine::synchronize_optimizer_state() {
    params_->wait_gathers();
    check_state_agreement(host_comms_.of(*grid_.shard), step_count_, layout_, optimizer_);
    const DType dtype = layout_.dtype();
    const std::size_t elem = ctx_.elem();
    for_each_replicated_part(plan_, grid_, update_->state_slots(), [&](int k, Communicator &comm, SyncOp op) {
        if (k < 0) { // the parameters where they are, on the engine's communicator
            unsigned char *params = params_->data();
            const std::size_t count = params_->bytes() / elem;
            update_->before_params_replaced(); // copies still reading the host side
            if (params_->on_host() && !space_->host_accessible()) { // cpu_offload_params: a host shard
                Communicator &host = host_comms_.of(comm);
                if (op == SyncOp::average) host.allreduce(params, params, count, dtype, ReduceOp::avg);
                else host.broadcast(params, count, dtype, 0);
            } else {
                space_->before_collective(comm);
                if (op == SyncOp::average) comm.allreduce(params, params, count, dtype, ReduceOp::avg);
                else comm.broadcast(params, count, dtype, 0);
            }
            update_->after_params_replaced();
            return;
        }
        // State lives inside the update's rules: through a host mirror laid out as ShardedOptimizer's.
        std::vector<unsigned char> state = update_->state_to_host(k);
        Communicator &host = host_comms_.of(comm);
        const std::size_t count = state.size() / elem;
        if (op == SyncOp::average) host.allreduce(state.data(), state.data(), count, dtype, ReduceOp::avg);
        else host.broadcast(state.data(), count, dtype, 0);
        update_->state_from_host(k, state.data());
    });
}

bool StepEngine::should_early_stop(bool local_vote) {
    return space_->allreduce_scalar(*grid_.world, local_vote ? 1.0 : 0.0, ReduceOp::max) != 0.0;
}

} // namespace shardopt::engine

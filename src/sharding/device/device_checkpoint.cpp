// The device engine's checkpoints and state synchronization. The checkpoint operations are
// ShardedOptimizer's (../checkpoint_target.hpp), run over a view of the engine in host
// mirrors: the parameters copied from the space, each state slot read span by span from the
// updaters into a buffer laid out as ShardedOptimizer's state is. A load stages into such
// mirrors and commits them (parameters, state, the updaters' step counts) only once every rank
// has validated everything. The operations' own collectives run on host buffers, through
// DeviceSpace::host_access.
#include <cstring>

#include "../checkpoint_target.hpp"
#include "device_engine.hpp"
#include "shardopt/error.hpp"

namespace shardopt::device {

std::vector<unsigned char> DeviceEngine::state_to_host(int k) {
    const std::size_t count = plan_.state_sharded ? layout_.shard_count() : layout_.padded_count();
    std::vector<unsigned char> host(count * elem_, 0);
    for (const BucketUpdate &u : updates_)
        for (std::size_t i = 0; i < u.segments.size(); ++i) {
            const OwnedSegment &s = u.segments[i];
            unsigned char *at = host.data() + (plan_.state_sharded ? s.local : s.flat) * elem_;
            u.updater->read_state(int(i), k, reinterpret_cast<float *>(at));
        }
    return host;
}

void DeviceEngine::state_from_host(int k, const unsigned char *host) {
    for (const BucketUpdate &u : updates_)
        for (std::size_t i = 0; i < u.segments.size(); ++i) {
            const OwnedSegment &s = u.segments[i];
            const unsigned char *at = host + (plan_.state_sharded ? s.local : s.flat) * elem_;
            u.updater->write_state(int(i), k, reinterpret_cast<const float *>(at));
        }
}

Communicator &DeviceEngine::host_comm(Communicator &comm) {
    for (const auto &[device_comm, host] : host_comms_)
        if (device_comm == &comm) return *host;
    host_comms_.emplace_back(&comm, space_->host_access(comm.shared_from_this()));
    return *host_comms_.back().second;
}

class DeviceEngine::CheckpointView final : public checkpoint::CheckpointTarget {
  public:
    explicit CheckpointView(DeviceEngine &engine) : e_(engine), state_(std::size_t(engine.state_slots_)) {
        e_.wait_param_gathers(); // the parameters they write are the ones saved or replaced
    }

    Communicator &world() override { return e_.host_comm(*e_.grid_.world); }
    const ParameterSet &layout() const override { return e_.layout_; }
    const OptimizerOptions &optimizer_options() const override { return e_.optimizer_; }
    int state_slots() const override { return e_.state_slots_; }
    const ShardingOptions &sharding() const override { return e_.options_; }
    std::int64_t step_count() const override { return e_.step_count_; }
    const StrategyPlan &plan() const override { return e_.plan_; }
    const HybridGrid &grid() const override { return e_.grid_; }
    int micro_step() const override { return e_.micro_step_; }
    const std::vector<OwnedSegment> &chunk_segments() const override { return e_.chunk_segments_; }

    const unsigned char *host_part(int k) override {
        if (k < 0) {
            if (params_.empty()) {
                params_.resize(e_.params_->bytes());
                e_.space_->copy_to_host(params_.data(), e_.params_->data(), params_.size());
            }
            return params_.data();
        }
        std::vector<unsigned char> &mirror = state_.at(std::size_t(k));
        if (mirror.empty()) mirror = e_.state_to_host(k);
        return mirror.data();
    }

    void gather_packed(int k, void *packed) override {
        if (k < 0) return e_.get_parameters(packed); // through the space's memory
        shardopt::gather_packed(e_.layout_, e_.plan_.state_sharded ? &e_.host_comm(*e_.grid_.shard) : nullptr,
                                host_part(k), packed);
    }

    void commit(const std::vector<unsigned char> &params, const std::vector<std::vector<unsigned char>> &state,
                std::int64_t step_count, double lr) override {
        e_.release_all_units(); // their contents are about to go stale
        e_.space_->copy_from_host(e_.params_->data(), params.data(), params.size());
        for (int k = 0; k < e_.state_slots_; ++k) e_.state_from_host(k, state[std::size_t(k)].data());
        // The rules' bias corrections count from the restored step.
        for (BucketUpdate &u : e_.updates_) u.updater->set_step_count(step_count);
        e_.step_count_ = step_count;
        e_.set_lr(lr);
        params_.clear();
        for (auto &mirror : state_) mirror.clear();
    }

  private:
    DeviceEngine &e_;
    std::vector<unsigned char> params_;              // host_part(-1), once asked for
    std::vector<std::vector<unsigned char>> state_; // host_part(k), once asked for
};

void DeviceEngine::save(const std::string &dir, CheckpointForm form) {
    CheckpointView view(*this);
    checkpoint::save(view, dir, form);
}

void DeviceEngine::load(const std::string &dir) {
    CheckpointView view(*this);
    checkpoint::load(view, dir, nullptr, 0);
}

std::vector<unsigned char> DeviceEngine::serialize() {
    CheckpointView view(*this);
    return checkpoint::serialize(view);
}

void DeviceEngine::deserialize(const void *data, std::size_t size) {
    CheckpointView view(*this);
    checkpoint::deserialize(view, data, size);
}

void DeviceEngine::synchronize_state() {
    wait_param_gathers();
    check_state_agreement(host_comm(*grid_.shard), step_count_, layout_, optimizer_);
    const DType dtype = layout_.dtype();
    for_each_replicated_part(plan_, grid_, state_slots_, [&](int k, Communicator &comm, SyncOp op) {
        if (k < 0) { // the parameters where they are, on the engine's communicator
            const std::size_t count = params_->bytes() / elem_;
            space_->before_collective(comm);
            if (op == SyncOp::average) comm.allreduce(params_->data(), params_->data(), count, dtype, ReduceOp::avg);
            else comm.broadcast(params_->data(), count, dtype, 0);
            return;
        }
        // State lives inside the updaters: through a host mirror laid out as ShardedOptimizer's.
        std::vector<unsigned char> state = state_to_host(k);
        Communicator &host = host_comm(comm);
        const std::size_t count = state.size() / elem_;
        if (op == SyncOp::average) host.allreduce(state.data(), state.data(), count, dtype, ReduceOp::avg);
        else host.broadcast(state.data(), count, dtype, 0);
        state_from_host(k, state.data());
    });
}

bool DeviceEngine::should_early_stop(bool local_vote) {
    return space_->allreduce_scalar(*grid_.world, local_vote ? 1.0 : 0.0, ReduceOp::max) != 0.0;
}

} // namespace shardopt::device

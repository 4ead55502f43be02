// AsyncSgdOptimizer's checkpoints: the checkpoint operations of src/checkpoint over a view of its
// state. Between sessions every rank's view holds the parameters and each owner the state of its
// shard: ZeRO-1's layout (full parameters, state by chunk), so the files are the other strategies'
// and load into any of them, at any world size, and back.
#include <algorithm>

#include "../checkpoint/checkpoint_target.hpp"
#include "../params/owned_segments.hpp"
#include "../sharding/placement.hpp"
#include "async_state.hpp"

namespace shardopt {
namespace {

class AsyncCheckpointView final : public checkpoint::CheckpointTarget {
  public:
    explicit AsyncCheckpointView(AsyncSgdOptimizer::State &s)
        : s_(s), placement_(placement_of(s.plan, s.grid)), chunks_(owned_chunks(s.layout, s.rank())),
          state_(std::size_t(s.owner->state_slots())) {}

    Communicator &world() override { return *s_.world; }
    const ParameterSet &layout() const override { return s_.layout; }
    const OptimizerOptions &optimizer_options() const override { return s_.optimizer; }
    int state_slots() const override { return s_.owner->state_slots(); }
    const ShardingOptions &sharding() const override { return s_.sharding; }
    std::int64_t step_count() const override { return s_.step_count; }
    const checkpoint::Placement &placement() const override { return placement_; }
    int micro_step() const override { return 0; }
    const std::vector<OwnedSegment> &chunk_segments() const override { return chunks_; }

    const unsigned char *host_part(int k) override {
        if (k < 0) return s_.view.data();
        std::vector<unsigned char> &mirror = state_.at(std::size_t(k));
        if (mirror.empty()) mirror = s_.owner->state_to_host(k);
        return mirror.data();
    }

    void gather_packed(int k, void *packed) override {
        if (k < 0) return s_.view_to_packed(packed);
        shardopt::gather_packed(s_.layout, s_.world.get(), host_part(k), packed);
    }

    std::vector<unsigned char> rank_state() override { return {}; }

    void commit(const std::vector<unsigned char> &params, const std::vector<std::vector<unsigned char>> &state,
                std::int64_t step_count, double lr, const std::vector<unsigned char> *) override {
        std::copy(params.begin(), params.end(), s_.view.data());
        s_.master_from_view();
        for (int k = 0; k < s_.owner->state_slots(); ++k) s_.owner->state_from_host(k, state[std::size_t(k)].data());
        // The rules' bias corrections count from the restored step.
        s_.owner->set_step_count(step_count);
        s_.step_count = step_count;
        s_.optimizer.lr = lr;
        s_.owner->set_lr(lr);
        for (auto &mirror : state_) mirror.clear();
    }

  private:
    AsyncSgdOptimizer::State &s_;
    const checkpoint::Placement placement_;
    std::vector<OwnedSegment> chunks_;
    std::vector<std::vector<unsigned char>> state_; // host_part(k), once asked for
};

} // namespace

void AsyncSgdOptimizer::save(const std::string &dir, CheckpointForm form) {
    AsyncCheckpointView view(*state_);
    checkpoint::save(view, dir, form);
}

void AsyncSgdOptimizer::load(const std::string &dir) {
    AsyncCheckpointView view(*state_);
    checkpoint::load(view, dir, nullptr, 0);
}

void AsyncSgdOptimizer::serialize(const std::function<void(const void *, std::size_t)> &write) {
    AsyncCheckpointView view(*state_);
    checkpoint::FunctionSink sink(write);
    checkpoint::serialize(view, write ? &sink : nullptr);
}

std::vector<unsigned char> AsyncSgdOptimizer::serialize() {
    AsyncCheckpointView view(*state_);
    return checkpoint::serialize(view);
}

void AsyncSgdOptimizer::deserialize(const void *data, std::size_t size) {
    AsyncCheckpointView view(*state_);
    checkpoint::deserialize(view, data, size);
}

} // namespace shardopt

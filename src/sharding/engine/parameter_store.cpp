#include "parameter_store.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "../../comm/finish_quietly.hpp"
#include "../memory_plan.hpp"
#include "shardopt/error.hpp"

namespace shardopt::engine {
namespace {

// The caller's parameter buffer, kept for the engine's life and never freed by it.
class BorrowedBuffer final : public SpaceBuffer {
  public:
    BorrowedBuffer(void *data, std::size_t bytes) : data_(static_cast<unsigned char *>(data)), bytes_(bytes) {}
    unsigned char *data() const noexcept override { return data_; }
    std::size_t bytes() const noexcept override { return bytes_; }

  private:
    unsigned char *data_;
    std::size_t bytes_;
};

} // namespace

ParameterStore::ParameterStore(const EngineContext &ctx, void *external, std::function<void()> note_buffers)
    : ctx_(ctx), note_buffers_(std::move(note_buffers)) {
    const ParameterSet &layout = ctx.layout;
    const std::size_t elem = ctx.elem(), full = layout.padded_count(), shard = layout.shard_count();
    if (external) {
        require(!ctx.plan.params_sharded(), ErrorCode::invalid_argument,
                "FSDP keeps parameters sharded at rest: caller-owned full parameter buffers are not supported");
        params_ = std::make_unique<BorrowedBuffer>(external, full * elem);
    } else if (ctx.offload.params) { // the shard at rest in host memory, where the CPU update writes it
        params_ = ctx.space.offload_lanes()->allocate_pinned(shard * elem, "parameter shard (cpu_offload_params)");
    } else {
        params_ = ctx.space.allocate((ctx.plan.params_sharded() ? shard : full) * elem, "parameters");
    }
    if (ctx.plan.params_sharded()) units_.resize(std::size_t(layout.bucket_count()));
}

ParameterStore::~ParameterStore() = default;

void ParameterStore::abandon() noexcept {
    for (auto &work : gathers_) finish_quietly(work);
    for (auto &unit : units_) finish_quietly(unit.work);
}

void *ParameterStore::parameters() {
    require(!ctx_.plan.params_sharded(), ErrorCode::invalid_state,
            "FSDP keeps parameters sharded: use gather(unit) or get_parameters()");
    wait_gathers();
    return params_->data();
}

void *ParameterStore::tensor_parameters(int t) {
    const ParameterSet &layout = ctx_.layout;
    const auto &tl = layout.tensor(t);
    if (!ctx_.plan.params_sharded()) {
        wait_gather(tl.bucket);
        return params_->data() + tl.offset * ctx_.elem();
    }
    const Unit &unit = units_[std::size_t(tl.bucket)];
    require(unit.gathered, ErrorCode::invalid_state,
            "tensor '" + tl.name + "' belongs to unit " + std::to_string(tl.bucket) + ", which is not gathered");
    return unit.buffer->data() + (tl.offset - layout.bucket(tl.bucket).offset) * ctx_.elem();
}

SpaceBufferPtr ParameterStore::take_unit_buffer() {
    if (!free_unit_buffers_.empty()) {
        SpaceBufferPtr buffer = std::move(free_unit_buffers_.back());
        free_unit_buffers_.pop_back();
        return buffer;
    }
    return ctx_.space.allocate(ctx_.layout.max_bucket_padded() * ctx_.elem(), "gathered FSDP unit");
}

void ParameterStore::gather_unit(int b) {
    const auto &bl = ctx_.layout.bucket(b);
    const std::size_t elem = ctx_.elem();
    Unit &unit = units_[std::size_t(b)];
    // With the shard on the host, it was copied into its own place in the unit: gathered in place.
    const unsigned char *shard = ctx_.offload.params
                                     ? unit.buffer->data() + std::size_t(ctx_.group_rank()) * bl.shard * elem
                                     : params_->data() + bl.shard_offset * elem;
    // The buffer may have been read by the caller's kernels (an earlier unit), and the shard
    // written by the update: both on the compute stream.
    ctx_.space.before_collective(*ctx_.grid.shard);
    unit.work = ctx_.grid.shard->allgather_async(shard, unit.buffer->data(), bl.shard, ctx_.dtype());
}

void *ParameterStore::gather(int b, const std::function<void(int)> &start_unit) {
    const auto &bl = ctx_.layout.bucket(b);
    if (!ctx_.plan.params_sharded()) {
        wait_gather(b);
        return params_->data() + bl.offset * ctx_.elem();
    }
    auto start = [&](int u) {
        Unit &unit = units_[std::size_t(u)];
        unit.buffer = take_unit_buffer();
        unit.gathered = true;
        ++gathered_units_;
        start_unit(u);
        note_buffers_();
    };
    Unit &unit = units_[std::size_t(b)];
    if (!unit.gathered) start(b);
    if (ctx_.options.fsdp_prefetch) {
        // A prefetch is a guess: it may only use the buffers the memory plan counts
        // (fsdp_live_units), never allocate past them.
        const int next = gather_order_.next_after(b, int(units_.size()));
        if (next >= 0 && !units_[std::size_t(next)].gathered &&
            gathered_units_ < std::size_t(fsdp_live_units(ctx_.options)))
            start(next);
    }
    if (unit.work) {
        WorkPtr work = std::move(unit.work);
        work->wait();
    }
    return unit.buffer->data();
}

void ParameterStore::release(int b) {
    ctx_.layout.bucket(b); // range check
    if (!ctx_.plan.params_sharded()) return;
    Unit &unit = units_[std::size_t(b)];
    if (!unit.gathered) return;
    if (unit.work) {
        WorkPtr work = std::move(unit.work);
        work->wait();
    }
    unit.gathered = false;
    --gathered_units_;
    // Spares for the units live at once (current + prefetched), so the steady state allocates
    // nothing. A spare is only refilled by a gather ordered after the caller's kernels.
    const std::size_t live_units = std::size_t(fsdp_live_units(ctx_.options));
    if (free_unit_buffers_.size() < live_units) free_unit_buffers_.push_back(std::move(unit.buffer));
    else unit.buffer.reset();
}

void ParameterStore::release_all_units() {
    for (int b = 0; b < int(units_.size()); ++b) release(b);
    gather_order_.end_step();
}

void ParameterStore::get(void *packed_out, bool in_space) {
    wait_gathers();
    const ParameterSet &layout = ctx_.layout;
    const std::size_t elem = ctx_.elem();
    Space &space = ctx_.space;
    auto *packed = static_cast<unsigned char *>(packed_out);
    SpaceBufferPtr gathered;
    if (ctx_.plan.params_sharded()) gathered = space.allocate(layout.max_bucket_padded() * elem, "parameter gather");
    std::size_t out = 0;
    for (int b = 0; b < layout.bucket_count(); ++b) {
        const auto &bl = layout.bucket(b);
        const unsigned char *full = params_->data() + bl.offset * elem;
        if (ctx_.plan.params_sharded()) {
            const unsigned char *shard = params_->data() + bl.shard_offset * elem;
            if (ctx_.offload.params) { // from the host into its place in the device buffer, gathered in place
                OffloadLanes &lanes = *space.offload_lanes();
                unsigned char *own = gathered->data() + std::size_t(ctx_.group_rank()) * bl.shard * elem;
                const CopyMark copied = lanes.copy_to_device_async(own, shard, bl.shard * elem);
                lanes.wait(copied); // before the host shard may change again
                lanes.compute_waits(copied);
                shard = own;
            }
            space.before_collective(*ctx_.grid.shard);
            ctx_.grid.shard->allgather(shard, gathered->data(), bl.shard, layout.dtype());
            full = gathered->data();
        }
        // The next bucket's allgather into `gathered` is ordered after this copy (before_collective).
        if (in_space)
            space.copy(packed + out * elem, full, bl.count * elem);
        else
            space.copy_to_host(packed + out * elem, full, bl.count * elem);
        out += bl.count;
    }
}

std::vector<unsigned char> ParameterStore::compose(const void *packed_host) const {
    const auto *packed = static_cast<const unsigned char *>(packed_host);
    const std::size_t elem = ctx_.elem();
    // The whole resident buffer (full or shard) is composed on the host, padding zeroed, and
    // copied in one transfer.
    std::vector<unsigned char> host(params_->bytes(), 0);
    std::size_t in = 0;
    for (const auto &bl : ctx_.layout.buckets()) {
        if (ctx_.plan.params_sharded()) {
            const std::size_t begin = std::size_t(ctx_.group_rank()) * bl.shard;
            const std::size_t end = std::min(bl.count, begin + bl.shard);
            if (begin < end)
                std::memcpy(host.data() + bl.shard_offset * elem, packed + (in + begin) * elem, (end - begin) * elem);
        } else {
            std::memcpy(host.data() + bl.offset * elem, packed + in * elem, bl.count * elem);
        }
        in += bl.count;
    }
    return host;
}

void ParameterStore::unpack_in_place() {
    require(!ctx_.plan.params_sharded(), ErrorCode::internal, "unpack_in_place: the parameters are sharded");
    unsigned char *p = params_->data();
    const std::size_t elem = ctx_.elem();
    const std::vector<BucketLayout> &buckets = ctx_.layout.buckets();
    std::size_t in = ctx_.layout.element_count();
    // Last bucket first: each moves up (offset >= packed position), past packed bytes not yet moved.
    for (auto bl = buckets.rbegin(); bl != buckets.rend(); ++bl) {
        in -= bl->count;
        std::memmove(p + bl->offset * elem, p + in * elem, bl->count * elem);
    }
    std::size_t at = 0; // the padding between and after the buckets
    for (const BucketLayout &bl : buckets) {
        std::memset(p + at, 0, bl.offset * elem - at);
        at = (bl.offset + bl.count) * elem;
    }
    std::memset(p + at, 0, params_->bytes() - at);
}

void ParameterStore::write(const unsigned char *host) {
    if (ctx_.offload.params) std::memcpy(params_->data(), host, params_->bytes());
    else ctx_.space.copy_from_host(params_->data(), host, params_->bytes());
}

unsigned char *ParameterStore::param_at(const OwnedSegment &s) const {
    return params_->data() + (ctx_.plan.params_sharded() ? s.local : s.flat) * ctx_.elem();
}

unsigned char *ParameterStore::owned_params(int b) const {
    const auto &bl = ctx_.layout.bucket(b);
    if (ctx_.plan.params_sharded()) return params_->data() + bl.shard_offset * ctx_.elem();
    const std::size_t chunk = ctx_.plan.state_sharded() ? std::size_t(ctx_.group_rank()) * bl.shard : 0;
    return params_->data() + (bl.offset + chunk) * ctx_.elem();
}

void ParameterStore::start_bucket_gather(int b) {
    if (gathers_.empty()) gathers_.resize(std::size_t(ctx_.layout.bucket_count()));
    const auto &bl = ctx_.layout.bucket(b);
    const std::size_t elem = ctx_.elem();
    unsigned char *bucket = params_->data() + bl.offset * elem;
    ctx_.space.before_collective(*ctx_.grid.shard);
    gathers_[std::size_t(b)] = ctx_.grid.shard->allgather_async(
        bucket + std::size_t(ctx_.group_rank()) * bl.shard * elem, bucket, bl.shard, ctx_.dtype());
}

void ParameterStore::wait_gather(int b) {
    if (b < int(gathers_.size()) && gathers_[std::size_t(b)]) {
        WorkPtr work = std::move(gathers_[std::size_t(b)]);
        work->wait();
    }
}

void ParameterStore::wait_gathers() {
    for (int b = 0; b < int(gathers_.size()); ++b) wait_gather(b);
}

std::size_t ParameterStore::buffer_bytes() const {
    std::size_t total = 0;
    for (const auto &u : units_) total += u.buffer ? u.buffer->bytes() : 0;
    for (const auto &f : free_unit_buffers_) total += f->bytes();
    return total;
}

} // namespace shardopt::engine

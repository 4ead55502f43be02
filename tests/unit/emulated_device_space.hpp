// A device Space for tests, without a device: its memory is host memory the engine must treat
// as a device's (host_accessible() is false), and its ZeRO-Offload lanes run each copy as late as
// the ordering contract of offload_lanes.hpp allows: a copy happens only when the host waits for
// it or the compute stream is made to wait for it. A missing wait therefore reads stale bytes
// (a gradient not yet on the host, parameters not yet back on the device), and a source reused
// too early is read after it changed; the test sees wrong numbers instead of passing by luck.
// Every lane operation and every collective the engine orders is recorded in a Trace.
#pragma once

#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "optim/parallel_update.hpp"
#include "sharding/engine/host_space.hpp"
#include "sharding/engine/offload_lanes.hpp"
#include "sharding/engine/space.hpp"

namespace shardopt::testing {

struct TraceEvent {
    enum Kind { copy_to_host, copy_to_device, host_waits, compute_waits, copy_ran, collective, marker } kind;
    int lane = -1;
    std::uint64_t seq = 0;
    std::size_t bytes = 0;
};

class EmulatedDeviceSpace final : public engine::Space, public engine::OffloadLanes {
  public:
    EmulatedDeviceSpace() : host_(engine::make_host_space(1)), threads_(2) {}

    std::vector<TraceEvent> trace; // what the engine asked for, in order
    void mark() { trace.push_back({TraceEvent::marker}); }

    // --- Space: host memory treated as a device's ---
    const char *name() const noexcept override { return "emulated-device"; }
    bool host_accessible() const noexcept override { return false; }
    int device() const noexcept override { return 0; }
    void check_supported(DType dtype, const OptimizerOptions &optimizer, bool tensors_split) const override {
        host_->check_supported(dtype, optimizer, tensors_split);
    }
    engine::SpaceBufferPtr allocate(std::size_t bytes, const char *what) override {
        return host_->allocate(bytes, what);
    }
    void zero(void *data, std::size_t bytes) override { host_->zero(data, bytes); }
    void add_into(void *dst, const void *src, std::size_t count, DType dtype) override {
        host_->add_into(dst, src, count, dtype);
    }
    void scale(void *data, std::size_t count, DType dtype, double factor) override {
        host_->scale(data, count, dtype, factor);
    }
    double sum_of_squares(const std::vector<engine::Span> &spans, DType dtype) override {
        return host_->sum_of_squares(spans, dtype);
    }
    void copy(void *dst, const void *src, std::size_t bytes) override { host_->copy(dst, src, bytes); }
    void copy_from_host(void *dst, const void *host, std::size_t bytes) override { host_->copy_from_host(dst, host, bytes); }
    void copy_to_host(void *host, const void *src, std::size_t bytes) override { host_->copy_to_host(host, src, bytes); }
    void before_collective(Communicator &) override { trace.push_back({TraceEvent::collective}); }
    double allreduce_scalar(Communicator &comm, double value, ReduceOp op) override {
        return host_->allreduce_scalar(comm, value, op);
    }
    CommunicatorPtr host_access(CommunicatorPtr comm) override { return comm; }
    std::unique_ptr<engine::SpanUpdater> make_updater(const std::vector<engine::Span> &params, DType dtype,
                                                      const OptimizerOptions &options) override {
        return host_->make_updater(params, dtype, options);
    }
    void synchronize() override {}
    engine::OffloadLanes *offload_lanes() override { return this; }

    // --- OffloadLanes: copies run when waited for, no earlier ---
    engine::SpaceBufferPtr allocate_pinned(std::size_t bytes, const char *what) override {
        pinned_bytes += bytes;
        return host_->allocate(bytes, what);
    }
    engine::CopyMark copy_to_host_async(void *host, const void *src, std::size_t bytes) override {
        return enqueue(0, host, src, bytes, TraceEvent::copy_to_host);
    }
    engine::CopyMark copy_to_device_async(void *dst, const void *host, std::size_t bytes) override {
        return enqueue(1, dst, host, bytes, TraceEvent::copy_to_device);
    }
    void wait(engine::CopyMark mark) override {
        if (mark.empty()) return;
        trace.push_back({TraceEvent::host_waits, mark.lane, mark.seq});
        run_until(mark);
    }
    void compute_waits(engine::CopyMark mark) override {
        if (mark.empty()) return;
        trace.push_back({TraceEvent::compute_waits, mark.lane, mark.seq});
        run_until(mark); // the compute "stream" runs everything at once: its later work must see the copy
    }
    std::unique_ptr<engine::SpanUpdater> make_host_updater(const std::vector<engine::Span> &params, DType dtype,
                                                           const OptimizerOptions &options) override {
        return engine::make_host_updater(params, dtype, options, threads_);
    }
    double host_sum_of_squares(const std::vector<engine::Span> &spans, DType dtype) override {
        return host_->sum_of_squares(spans, dtype); // the order this space's own sum uses
    }

    std::size_t pinned_bytes = 0;
    std::size_t copies_pending() const { return lanes_[0].size() + lanes_[1].size(); }

  private:
    struct Copy {
        std::uint64_t seq;
        void *dst;
        const void *src;
        std::size_t bytes;
    };
    engine::CopyMark enqueue(int lane, void *dst, const void *src, std::size_t bytes, TraceEvent::Kind kind) {
        if (bytes == 0) return {};
        const std::uint64_t seq = ++issued_[lane];
        lanes_[lane].push_back({seq, dst, src, bytes});
        trace.push_back({kind, lane, seq, bytes});
        return {lane, seq};
    }
    void run_until(engine::CopyMark mark) {
        auto &queue = lanes_[mark.lane];
        while (!queue.empty() && queue.front().seq <= mark.seq) { // in lane order, reading the source now
            const Copy c = queue.front();
            queue.pop_front();
            std::memcpy(c.dst, c.src, c.bytes);
            trace.push_back({TraceEvent::copy_ran, mark.lane, c.seq, c.bytes});
        }
    }

    std::unique_ptr<engine::Space> host_;
    ParallelUpdate threads_;
    std::deque<Copy> lanes_[2];
    std::uint64_t issued_[2] = {0, 0};
};

} // namespace shardopt::testing

// The CUDA space's OffloadLanes (offload_lanes.hpp): two non-blocking streams of their own on
// the space's device (device-to-host and host-to-device, so the two directions overlap each
// other and the compute and communicator streams), page-locked memory from cudaHostAlloc, the
// CPU rules on a pool of update threads, and the norm in the kernels' order (sumsq_order.hpp).
// Every host wait polls an event, bounded by the communicator's timeout.
#pragma once

#include <cuda_runtime_api.h>

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "offload_lanes.hpp"
#include "optim/parallel_update.hpp"
#include "shardopt/comm.hpp"

namespace shardopt::engine {

class CudaOffloadLanes final : public OffloadLanes {
  public:
    // `timeout`: the communicator's current timeout (bounds every host wait). update_threads as
    // ShardingOptions::update_threads.
    CudaOffloadLanes(int device, cudaStream_t compute, std::function<Communicator::Duration()> timeout,
                     int update_threads);
    ~CudaOffloadLanes() override;
    CudaOffloadLanes(const CudaOffloadLanes &) = delete;
    CudaOffloadLanes &operator=(const CudaOffloadLanes &) = delete;

    SpaceBufferPtr allocate_pinned(std::size_t bytes, const char *what) override;
    CopyMark copy_to_host_async(void *host, const void *src, std::size_t bytes) override;
    CopyMark copy_to_device_async(void *dst, const void *host, std::size_t bytes) override;
    void wait(CopyMark mark) override;
    void compute_waits(CopyMark mark) override;
    std::unique_ptr<SpanUpdater> make_host_updater(const std::vector<Span> &params, DType dtype,
                                                   const OptimizerOptions &options) override;
    double host_sum_of_squares(const std::vector<Span> &spans, DType dtype) override;

  private:
    // A copy stream and the events recorded after its copies, oldest first; `done`: every copy
    // up to this sequence number is known to be complete.
    struct Lane {
        cudaStream_t stream = nullptr;
        std::uint64_t issued = 0, done = 0;
        std::deque<std::pair<std::uint64_t, cudaEvent_t>> pending;
    };
    Lane &lane(const CopyMark &mark);
    CopyMark enqueue(int index, void *dst, const void *src, std::size_t bytes, cudaMemcpyKind kind);
    // Marks the lane's completed copies done and recycles their events.
    void reap(Lane &lane);
    cudaEvent_t take_event();

    int device_;
    cudaStream_t compute_;
    std::function<Communicator::Duration()> timeout_;
    Lane lanes_[2]; // 0: to the host, 1: to the device
    cudaEvent_t follow_ = nullptr; // the compute stream's position a copy to the device follows
    std::vector<cudaEvent_t> free_events_;
    ParallelUpdate threads_;
};

} // namespace shardopt::engine

// Gate: a host function that holds a CUDA stream until opened, so everything enqueued behind it
// waits. Bounded: it opens by itself after `limit` and says so (timed_out()), so a wrong ordering
// fails a test instead of hanging it. The gate must outlive the host function: free it only once
// the held stream has passed it. For the GPU tests (a real device) and the CUDA stand-in alike.
#pragma once

#include <cuda_runtime_api.h>

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace gpu_test {

class Gate {
  public:
    explicit Gate(std::chrono::milliseconds limit = std::chrono::seconds(10)) : limit_(limit) {}

    cudaError_t enqueue(cudaStream_t stream) { return cudaLaunchHostFunc(stream, &Gate::hold, this); }
    void open() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            open_ = true;
        }
        opened_.notify_all();
    }
    bool timed_out() {
        std::lock_guard<std::mutex> lock(mutex_);
        return timed_out_;
    }

  private:
    static void CUDART_CB hold(void *self) {
        auto *gate = static_cast<Gate *>(self);
        std::unique_lock<std::mutex> lock(gate->mutex_);
        gate->timed_out_ = !gate->opened_.wait_for(lock, gate->limit_, [&] { return gate->open_; });
    }

    const std::chrono::milliseconds limit_;
    std::mutex mutex_;
    std::condition_variable opened_;
    bool open_ = false;
    bool timed_out_ = false;
};

} // namespace gpu_test

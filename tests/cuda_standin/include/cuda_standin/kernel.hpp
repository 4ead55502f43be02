// Force-included (-include) into shardopt's .cu files when the stand-in build compiles them as
// host C++: the CUDA built-ins the kernels use (threadIdx, __syncthreads, __shfl_down_sync,
// __ldcg, __stcg, __shared__) mapped onto the stand-in's block executor, and
// cuda_standin::launch behind SHARDOPT_LAUNCH (src/optim/cuda/kernel_launch.cuh). The kernels'
// own code is what runs; only the hardware under it is emulated.
#pragma once

// Before the CUDA headers, which define these only when not defined yet: a block's shared
// variables are per OS thread (one block runs on a thread at a time), launch bounds mean nothing.
#define __shared__ static thread_local
#define __launch_bounds__(...)

#include <cuda_runtime.h>

#include <math.h> // sqrtf, pow, isfinite...: global names in device code

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>

#include "../../block_executor.hpp"

#define threadIdx (::cuda_standin::thread_index())
#define blockIdx (::cuda_standin::block_index())
#define blockDim (::cuda_standin::block_dim())
#define gridDim (::cuda_standin::grid_dim())

inline void __syncthreads() { ::cuda_standin::sync_block(); }

template <class T> T __shfl_down_sync(unsigned /*mask*/, T value, unsigned delta, int /*width*/ = 32) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "shuffles move up to 8 bytes");
    uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof(T));
    bits = ::cuda_standin::shuffle_down(bits, int(delta));
    std::memcpy(&value, &bits, sizeof(T));
    return value;
}

// cuda_runtime.h's C++ overload for a kernel (nvcc adds it; a host compiler does not see it).
template <class... P> cudaError_t cudaFuncGetAttributes(cudaFuncAttributes *attributes, void (*kernel)(P...)) {
    return ::cudaFuncGetAttributes(attributes, reinterpret_cast<const void *>(kernel));
}

template <class T> T __ldcg(const T *ptr) { return *ptr; }
template <class T> void __stcg(T *ptr, T value) { *ptr = value; }

namespace cuda_standin {

// Validates the configuration (cudaErrorInvalidConfiguration, cudaErrorInvalidResourceHandle
// as cudaGetLastError reports them) and enqueues run_grid(grid, block, body) on the stream.
void launch_kernel(dim3 grid, dim3 block, cudaStream_t stream, std::function<void()> body);

template <class... Params> class Launch {
  public:
    Launch(void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t stream)
        : kernel_(kernel), grid_(grid), block_(block), stream_(stream) {}

    // The arguments are converted and copied now, as a launch captures its parameters.
    template <class... Args> void operator()(Args &&...args) const {
        auto params = std::make_shared<std::tuple<std::decay_t<Params>...>>(std::forward<Args>(args)...);
        auto *kernel = kernel_;
        launch_kernel(grid_, block_, stream_, [kernel, params] { std::apply(kernel, *params); });
    }

  private:
    void (*kernel_)(Params...);
    dim3 grid_, block_;
    cudaStream_t stream_;
};

template <class... Params>
Launch<Params...> launch(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t /*shared_bytes*/,
                         cudaStream_t stream) {
    return Launch<Params...>(kernel, grid, block, stream);
}

} // namespace cuda_standin

// SHARDOPT_LAUNCH(kernel, grid, block, shared_bytes, stream)(args...): every kernel launch of
// the project. Under nvcc it is the <<<>>> launch; in the CUDA stand-in build
// (tests/cuda_standin/, the .cu files compiled as host C++) it runs the same kernel code on the
// stand-in's stream workers, so the host code around the kernels can be tested without a GPU.
#pragma once

#if defined(SHARDOPT_CUDA_STANDIN)
#define SHARDOPT_LAUNCH(kernel, grid, block, shared_bytes, stream) \
    ::cuda_standin::launch(kernel, grid, block, shared_bytes, stream)
#else
#define SHARDOPT_LAUNCH(kernel, grid, block, shared_bytes, stream) kernel<<<grid, block, shared_bytes, stream>>>
#endif

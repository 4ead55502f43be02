// Host entry points of the CUDA kernels (one .cu per rule or pass). Each enqueues on the given
// stream and never waits; launch errors are thrown as Error by the caller's check.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "shardopt/types.hpp"
#include "lowbit_codes.hpp"
#include "step_control.hpp"
#include "tensor_table.hpp"

namespace shardopt::cuda::detail {

// What every chunked launch needs: the tables, this step's scalars, and the rule's variant.
struct ChunkLaunch {
    const TensorEntry *tensors = nullptr;
    const Chunk *chunks = nullptr;
    int chunk_count = 0;
    const StepScalars *scalars = nullptr;
    uint32_t flags = 0;
    DType dtype = DType::f32;
    cudaStream_t stream = nullptr;
};

// LAMB's extra buffers: two partial sums per chunk, and per tensor its chunk range and
// lr * trust ratio.
struct LambBuffers {
    double *partials = nullptr;
    const TensorChunks *tensor_chunks = nullptr;
    float *tensor_lr = nullptr;
    int tensor_count = 0;
};

// Pass 1: partials[c] = sum of grad^2 over chunk c (raw, still loss-scaled), in double: a
// float gradient squared cannot overflow a double sum, so the sum is finite exactly when
// every gradient is.
void launch_grad_sumsq(const ChunkLaunch &launch, double *partials);
// Pass 2 (one block): reduces the partials and decides the step (see step_control.cu).
void launch_step_control(StepControl *control, StepScalars *scalars, const double *partials, int partial_count,
                         const StepHyper &hyper, cudaStream_t stream);
// Pass 3: the update.
void launch_sgd(const ChunkLaunch &launch);
void launch_adam(const ChunkLaunch &launch); // Adam and AdamW
void launch_rmsprop(const ChunkLaunch &launch);
void launch_adagrad(const ChunkLaunch &launch);
void launch_lamb(const ChunkLaunch &launch, const LambBuffers &lamb);
void launch_lion(const ChunkLaunch &launch);
void launch_adamax(const ChunkLaunch &launch);
void launch_adadelta(const ChunkLaunch &launch);

// The low-bit update (lowbit.cu): groups of kLowbitGroup elements of a quantized tensor, each taken by
// one block in turn; the tensors under lowbit::kMinElements take the full-precision kernels.
struct LowbitLaunch {
    const TensorEntry *tensors = nullptr;
    const LowbitEntry *entries = nullptr;
    const Chunk *groups = nullptr; // Chunk::tensor: the index in `entries`
    int group_count = 0;
    const LowbitBooks *books = nullptr;
    const StepScalars *scalars = nullptr;
    uint32_t flags = 0;
    DType dtype = DType::f32;
    int bits = 8; // 8 or 4
    cudaStream_t stream = nullptr;
};
void launch_lowbit_adam(const LowbitLaunch &launch); // Adam and AdamW
void launch_lowbit_sgd(const LowbitLaunch &launch);  // SGD with momentum

// Tables and initialization (tables.cu).
constexpr int kGradPatchSize = 480; // pointers per launch: the argument stays under 4 KiB
struct GradPatch {
    int32_t first = 0;
    int32_t count = 0;
    const void *grads[kGradPatchSize] = {};
};
void launch_set_grads(TensorEntry *tensors, const GradPatch &patch, cudaStream_t stream);
// master[i] = float(param[i]) for one tensor's `count` elements (bf16/f16), or param -> master.
void launch_master_from_params(float *master, const void *param, int64_t count, DType dtype, cudaStream_t stream);
// param[i] = round(master[i]) (bf16/f16).
void launch_params_from_master(void *param, const float *master, int64_t count, DType dtype, cudaStream_t stream);
void launch_fill(float *data, int64_t count, float value, cudaStream_t stream);

// Each loads its kernels for `dtype` now (cudaFuncGetAttributes): with CUDA's lazy module
// loading the first step() would otherwise load modules, which may synchronize the device.
void preload_grad_sumsq(DType dtype);
void preload_step_control();
void preload_sgd(DType dtype);
void preload_adam(DType dtype);
void preload_rmsprop(DType dtype);
void preload_adagrad(DType dtype);
void preload_lamb(DType dtype);
void preload_lion(DType dtype);
void preload_adamax(DType dtype);
void preload_adadelta(DType dtype);
void preload_lowbit_adam(DType dtype, int bits);
void preload_lowbit_sgd(DType dtype, int bits);
void preload_tables();

} // namespace shardopt::cuda::detail

// The device-side tables every multi-tensor kernel reads, built once by the host (chunk_plan)
// and copied to the device: one entry per tensor and one per chunk. A launch has one block per
// chunk, so one launch covers any number of tensors of any sizes (PyTorch's multi_tensor_apply
// passes the same information through kernel arguments, a few hundred tensors per launch).
// Plain structs: included by host C++ and by the .cu files alike.
#pragma once

#include <cstdint>

namespace shardopt::cuda::detail {

constexpr int kMaxStateSlots = 4;     // shardopt::Segment's limit; AMSGrad uses 3
constexpr int kChunkElements = 16384; // a multiple of every vector width
constexpr int kBlockThreads = 256;    // threads per chunk block

struct TensorEntry {
    void *param = nullptr;        // the caller's parameters, in the optimizer's dtype
    const void *grad = nullptr;   // this step's gradient (rewritten when the caller's pointer changes)
    float *master = nullptr;      // fp32 master weights; == param for f32
    float *state[kMaxStateSlots] = {};
    int64_t count = 0;
};

struct Chunk {
    int32_t tensor = 0;
    int32_t count = 0;  // elements in this chunk, 1 .. kChunkElements
    int64_t offset = 0; // first element of the chunk within its tensor
};

// A tensor's chunks are consecutive in the chunk table (LAMB sums its per-chunk norms).
struct TensorChunks {
    int32_t first = 0;
    int32_t count = 0;
};

// Which variant of a rule runs, fixed at creation (the kernels branch on it uniformly).
enum UpdateFlags : uint32_t {
    kWeightDecay = 1u << 0, // weight_decay != 0 (L2, or decoupled for AdamW and LAMB)
    kDecoupled = 1u << 1,   // AdamW
    kAmsgrad = 1u << 2,
    kMomentum = 1u << 3,    // SGD / RMSprop momentum > 0
    kNesterov = 1u << 4,
    kCentered = 1u << 5,    // RMSprop
    kLowbitMaxima = 1u << 6, // the low-bit kernels' maxima pass: shared blocks' new maxima, nothing written
};

} // namespace shardopt::cuda::detail

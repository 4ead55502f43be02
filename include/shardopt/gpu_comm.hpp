// GPU communicators: collectives over device buffers.
//
// Two backends, each chosen by name (SHARDOPT_BACKEND=nccl|staged, or the factories below);
// neither is ever picked as a silent fallback for the other:
//   nccl    NCCL over the job's GPUs, one GPU per rank. The NCCL unique id travels through the
//           same bootstrap rendezvous as UCX worker addresses (rank 0's blob carries it), and
//           the rendezvous connections stay open as the liveness channel that reports dead
//           ranks. Init is NCCL's non-blocking init, polled with the communicator's timeout.
//   staged  device buffers reduced through pinned host memory over the UCX backend (copy to
//           the host, run the host collective, copy back). For several processes sharing one
//           GPU (NCCL refuses two ranks on one device) and for hosts without NCCL.
//
// Buffers are device pointers (the staged path also takes managed or host memory). Every
// collective of Communicator works, with every dtype and op. NCCL defines avg of floating
// types as the sum of x * (1/n), so at n > 1 it may differ from the CPU backends in the last
// bit; integer avg truncates toward zero as everywhere else.
//
// Streams: each communicator enqueues its collectives on one CUDA stream, its own
// (non-blocking) unless set_stream() gave it the caller's. Every operation is ordered after the
// work the caller enqueued before the call on the caller's stream: the one set_stream() gave,
// else the legacy default stream (cudaMemcpy, cudaMemset, kernels launched without a stream),
// as PyTorch's collectives follow the current stream. Work on other streams must be
// synchronized by the caller first. Sends and receives run on streams of their own, ordered
// the same way. A blocking call returns when the operation completed
// on the device; an async call's Work completes when it did (async calls of one queue run one
// after another). On nccl a send completes when its receiver has the data (NCCL does not
// buffer), and messages between two ranks match in issue order (NCCL has no tags). Every wait is bounded by timeout(): on a timeout,
// an NCCL async error or a lost peer the communicator is aborted (ncclCommAbort) and every
// later call fails with an Error naming what happened (timeout, peer_lost, invalid_state).
#pragma once

#include <string>

#include "shardopt/bootstrap.hpp"
#include "shardopt/comm.hpp"

// cudaStream_t is `CUstream_st *` (see device_optimizer.hpp): callers pass theirs without this
// header needing CUDA's.
struct CUstream_st;

namespace shardopt::gpu {

using Stream = CUstream_st *;

// True when this build has the NCCL backend (CUDA and nccl.h found at configure time) and NCCL
// can be loaded here. NCCL is not linked: the first call of this or create_nccl_communicator
// opens libnccl.so.2 (the dynamic loader's search path), or the library that the environment
// variable SHARDOPT_NCCL_LIBRARY names; it is loaded once per process.
bool nccl_available() noexcept;
// True when this build has the staged backend (CUDA and UCX found at configure time).
bool staged_available() noexcept;

struct GpuCommOptions {
    // CUDA device ordinal. -1: local rank % device count when the launcher gave a local rank,
    // else the calling thread's current device.
    int device = -1;
};

// Joins the job described by `config` on NCCL. Throws Error(unsupported) when built without
// NCCL, when the NCCL library cannot be loaded (the message names it and says how to fix it),
// or when no CUDA device is visible; timeout / peer_lost when the rendezvous or NCCL's
// init does not finish within config.timeout.
CommunicatorPtr create_nccl_communicator(const BootstrapConfig &config, const GpuCommOptions &options = {});

// Joins the job over UCX and stages device buffers through pinned host memory. Throws
// Error(unsupported) when built without CUDA or UCX, or when no CUDA device is visible.
CommunicatorPtr create_staged_communicator(const BootstrapConfig &config, const GpuCommOptions &options = {});

// The device and stream of a GPU communicator (nccl or staged, or a communicator split from
// one); Error(invalid_argument) for any other communicator.
int device_of(const Communicator &comm);
Stream stream_of(const Communicator &comm);
// Enqueue this communicator's collectives on `stream` from now on (nullptr: back to its own
// stream). Call it between operations, not while async ones are in flight on the old stream.
void set_stream(Communicator &comm, Stream stream);
// Makes `consumer` wait for the work enqueued on `producer` so far: an event recorded on
// `producer` that `consumer` waits for on the device (the host never waits, and nothing else is
// synchronized). For handing device memory to another library's stream (DLPack's
// __dlpack__(stream=...)). nullptr is the legacy default stream. Error(unsupported) without CUDA.
void order_after(Stream consumer, Stream producer);

} // namespace shardopt::gpu

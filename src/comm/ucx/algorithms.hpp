// The collective algorithms of the UCX backend, one per file. Each runs one collective on an
// Exchange (which already sent the call's header) and returns when this rank's part is done;
// the caller then finishes the Exchange. Reductions go through reduction.hpp in an order fixed
// by the world size and the algorithm, so repeated runs are bitwise identical; avg is a sum
// divided once by the size at the end.
#pragma once

#include <cstddef>
#include <vector>

#include "exchange.hpp"

namespace shardopt::ucx {

class UcxComm;

// size() == 1: copies only.
void local_collective(Exchange &ex);

// Small allreduce: recursive doubling (non-powers of two fold the extra ranks in first).
void recursive_doubling_allreduce(Exchange &ex);
// Large allreduce: pipelined ring reduce-scatter then ring allgather, chunked so transfer,
// reduction and forwarding overlap; the allgather receives straight into the output.
void ring_allreduce(Exchange &ex);
void ring_reduce_scatter(Exchange &ex);
void ring_allgather(Exchange &ex);
// Binomial tree rooted at call.root; chunks are forwarded to children as they arrive.
void binomial_broadcast(Exchange &ex);
// Small reduce: binomial tree. Large: ring reduce-scatter, then owners send their segment to root.
void binomial_reduce(Exchange &ex);
void ring_reduce(Exchange &ex);

// Ranks sharing a host (ex.arena()): every rank published its input with its header; each
// computes the result from the slots (reductions in rank order, so every rank gets the same bits).
void shm_collective(Exchange &ex);
// The result of such a collective once every rank published `seq` with the same call (the
// shared part of shm_collective and UcxComm's path without an Exchange).
void shm_result(Communicator &comm, const ShmArena &arena, const Call &call, std::uint64_t seq);
// Whether `call` on n ranks fits the arena's slots, and the bytes this rank publishes for it.
bool shm_fits(const Call &call, int n, std::size_t capacity);
const void *shm_payload(const Call &call, int rank, int n, std::size_t &bytes);

// Larger collectives among ranks sharing a host: each rank copies straight out of its peers'
// buffers (process_vm_readv) at the addresses they published in the arena. Where the job may
// not copy between processes (UcxComm::cma() false: the attach vote), only the large allreduces whose
// inputs go through the arena's staging rings take this path (they read no process's memory).
bool cma_applicable(const Call &call, const UcxComm &comm);
void cma_collective(Exchange &ex);

// Ranks on several hosts with the same number of ranks each (UcxComm::hierarchy()): allreduce,
// reduce_scatter, allgather and broadcast inside each host first, the inter-host part split
// across every local rank (hierarchical_collective.cpp). Runs after the call's headers agreed.
bool hierarchical_applicable(const Call &call, const UcxComm &comm);
void hierarchical_collective(UcxComm &comm, const Call &call);

// --- shared by the ring algorithms (ring.cpp) ----------------------------------------------
// `count` elements cut into n contiguous segments as evenly as possible.
struct Segments {
    std::vector<std::size_t> offset, count; // elements
    std::size_t max_count = 0;
};
Segments even_segments(std::size_t count, int n);
// n segments of exactly `each` elements (reduce_scatter / allgather layout).
Segments equal_segments(std::size_t each, int n);

ReduceOp accumulate_op(ReduceOp op); // avg accumulates as sum

} // namespace shardopt::ucx

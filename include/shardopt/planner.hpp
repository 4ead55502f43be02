// The planner: which strategy fits a model on a cluster, and how fast a step will be, before
// anything runs (docs/planning.md).
//
// Memory comes from the library's own memory plan (src/sharding/memory_plan.hpp): the very
// computation the optimizer's up-front fit check uses, equal to memory_stats() (the planner's
// exactness test walks every configuration of the equivalence suite, every rank). Time comes
// from an alpha-beta model of the algorithms the library runs: the UCX backend's shared-memory
// collectives on one host, its flat ring and recursive doubling, the hierarchical allreduce in
// pipelined pieces across hosts, the compressed reducers' exchanges, the engine's bucket
// reductions queued behind the backward pass (staging buffers, FSDP's gathers with prefetch), the
// update at a measured rate, and the pipeline schedules simulated action by action.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "shardopt/optim.hpp"
#include "shardopt/params.hpp"
#include "shardopt/pipeline_schedule.hpp"
#include "shardopt/sharded_optimizer.hpp"

namespace shardopt::planner {

// --- memory ------------------------------------------------------------------------------------
// What world rank `rank` of a job of `world_size` ranks holds once it has run a step, for the
// arguments ShardedOptimizer::create takes (the layout as registered, unplanned). host_of_ranks:
// the world's hosts (empty: one host); device_space: the memory is a device's that can offload
// (-1: options.memory == cuda). Equal to that rank's memory_stats() field for field.
MemoryStats rank_memory(const ParameterSet &layout, const OptimizerOptions &optimizer, const ShardingOptions &options,
                        int world_size, int rank, const std::vector<int> &host_of_ranks = {},
                        bool external_params = false, int device_space = -1);

// --- the cluster ---------------------------------------------------------------------------------
// One level of links: alpha (seconds per message) and bandwidth (bytes per second, each way).
struct Link {
    double latency = 0.0;
    double bandwidth = 0.0;
    // What one connection gets of it (a TCP stream through a shaper, one NIC queue); 0: all of it.
    double single_flow_bandwidth = 0.0;
    // The latency of collectives up to 64 KiB (the shared-memory arena, recursive doubling);
    // 0: latency.
    double small_latency = 0.0;
    // Inside a host of CPU ranks: what the shared-memory collectives move through memory per second
    // when the host's ranks outnumber its cores (they take turns on the cores, and every hand-off
    // waits for a scheduler round); calibrated with two ranks per core. 0: bandwidth.
    double crowded_bandwidth = 0.0;
};

// hosts x ranks_per_host ranks. Ranks of one host reach each other through `intra` (shared
// memory for CPU ranks: the bandwidth is the host's memory copy bandwidth that the library's
// shared-memory collectives share; NVLink for GPUs), hosts through `inter` (each host's link to
// the network, shared by its ranks).
struct Cluster {
    int hosts = 1;
    int ranks_per_host = 1;
    MemorySpace memory = MemorySpace::host; // cuda: one GPU per rank
    std::uint64_t device_memory = 0;        // bytes per GPU (cuda)
    std::uint64_t host_memory = 0;          // bytes per host, shared by its ranks (0: unlimited)
    Link intra, inter;
    // Bytes per second one rank's optimizer update streams through memory (parameters, gradient
    // and state read, parameters and state written): the CPU's for host memory and for
    // ZeRO-Offload, the GPU's for cuda memory. host_update_bandwidth caps all ranks of a host
    // together (0: no cap). pcie: a GPU's copies to and from host memory (ZeRO-Offload).
    double update_bandwidth = 0.0;
    double host_update_bandwidth = 0.0;
    double gpu_update_bandwidth = 0.0;
    Link pcie;
    int cores_per_host = 0; // 0: as many as ranks (CPU ranks past the cores share them)
    std::string name;       // the profile's name, for reports
    int ranks() const noexcept { return hosts * ranks_per_host; }
};

// A cluster profile as JSON (what `./dev bench calibrate` writes; docs/planning.md has the
// fields). Throws Error(invalid_argument) naming what is missing or out of range.
Cluster cluster_from_json(const std::string &json);
std::string cluster_to_json(const Cluster &cluster);
// Error(invalid_argument) for impossible shapes, zero bandwidths and the like.
void validate_cluster(const Cluster &cluster);

// --- the model and the run -----------------------------------------------------------------------
struct ModelSpec {
    // The parameters: a layout as the caller registers it (one pipeline stage's tensors come from
    // splitting it by tensor order), or, when it has no tensors, a transformer of `parameters`
    // parameters: `layers` blocks of hidden size `hidden` (0: sizes typical for that count).
    ParameterSet layout;
    double parameters = 0.0;
    int layers = 0;
    int hidden = 0;
    // Activations crossing a pipeline stage or tensor-parallel collective per micro-batch:
    // sequence x micro-batch x hidden elements (0 sequence: none modelled).
    int sequence = 0;
    int micro_batch = 1;
    std::size_t activation_element_bytes = 2;
};

struct RunSpec {
    OptimizerOptions optimizer = OptimizerOptions::defaults(OptimizerKind::adam);
    DType dtype = DType::f32;
    // Forward + backward of one step on one rank (the whole job's work over its ranks: the same
    // for every strategy on the same cluster). The backward takes backward_share of it.
    double compute_seconds = 0.0;
    double backward_share = 2.0 / 3.0;
    // The options every candidate starts from (buckets, staging buffers, prefetch, accumulation,
    // compression, ...): the search varies strategy, grid and offload.
    ShardingOptions base;
    // Tokens per step, the whole job's (0: one micro-batch per data-parallel rank): with the
    // model's sequence and micro-batch, how many micro-batches each data-parallel rank runs (the
    // tensor-parallel collectives' count; a pipeline's micro-batches when not given).
    double tokens_per_step = 0.0;
    // Pipeline runs: micro-batches per step and schedule.
    int micro_batches = 0; // 0: from tokens_per_step, else 4 x pipeline stages
    PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
    // What the search tries: strategies (empty: ddp, zero1, zero2, fsdp, and hybrid grids and
    // HSDP over them), tensor-parallel sizes up to the ranks of a host, pipeline sizes.
    std::vector<Strategy> strategies;
    int max_tensor_parallel = 0; // 0: ranks per host, and 1 without a model shape
    int max_pipeline_parallel = 0; // 0: the hosts, and 1 without a model shape
    bool try_offload = true;       // cuda: ZeRO-Offload variants too
    // Memory each rank keeps for itself besides the optimizer's (activations, workspace).
    std::uint64_t reserve_bytes = 0;
};

// --- the answer ------------------------------------------------------------------------------------
struct TimeBreakdown {
    double compute = 0.0;        // forward + backward
    double exposed_comm = 0.0;   // reduction (and FSDP gathers) the computation did not hide
    double update = 0.0;         // the optimizer update
    double post_update = 0.0;    // ZeRO's parameter allgather after the update, not hidden
    double bubble = 0.0;         // pipeline: idle time of the schedule
    double tensor_comm = 0.0;    // tensor-parallel collectives of the forward and backward
    double step = 0.0;           // all of it: the predicted step time
    double reduce_comm = 0.0;    // the gradient reduction alone, hidden or not
};

struct Plan {
    std::string name; // "zero2", "hybrid pp2 tp4 dp16 (fsdp)", "fsdp +offload", ...
    ShardingOptions options;
    MemoryStats memory;            // per rank (the rank holding the most)
    std::uint64_t device_bytes = 0; // in the rank's memory space (cuda: the GPU; host: host memory)
    std::uint64_t host_bytes = 0;   // in host memory besides (ZeRO-Offload)
    std::uint64_t host_total_bytes = 0; // one host's ranks together in host memory
    bool fits = false;
    std::string why_not; // when it does not fit
    // Bytes each rank sends per step, inside its host and between hosts.
    std::uint64_t sent_intra = 0, sent_inter = 0;
    TimeBreakdown time;
};

struct PlanReport {
    std::vector<Plan> plans; // those that fit, fastest first; then those that do not
    int fitting = 0;
};

// Throws Error(invalid_argument) for a model or cluster the planner cannot take (no parameters,
// an impossible shape, zero bandwidth), naming it.
PlanReport plan(const ModelSpec &model, const Cluster &cluster, const RunSpec &run);
// One candidate only: the options as given (strategy, grid, offload).
Plan evaluate(const ModelSpec &model, const Cluster &cluster, const RunSpec &run, const ShardingOptions &options);

// The alpha-beta time of one collective over `ranks` ranks spread over the hosts of `cluster` as
// the library lays them out (hierarchical where every host holds the same number >= 2 of them
// and more than one host), for reports and the validation benchmark. kind: "allreduce",
// "reduce_scatter" (bytes: the whole input), "allgather" (bytes: the whole output).
double collective_seconds(const Cluster &cluster, const std::string &kind, std::uint64_t bytes, int hosts,
                          int ranks_per_host, bool hierarchical = true);

} // namespace shardopt::planner

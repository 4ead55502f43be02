// The planner (docs/planning.md) over shardopt_plan_create and shardopt_plan_rank_memory: which strategies fit a model on a
// cluster, fastest first, with their memory and step time, and what one rank of a job would hold.
using System;
using System.Collections.Generic;
using Shardopt.Native;
using static Shardopt.Native.shardopt_native;

namespace Shardopt.DistributedTraining
{
    /// <summary>Hosts x RanksPerHost ranks (Gpus: one GPU of DeviceMemoryBytes per rank); bandwidths in bytes/s, latencies in
    /// seconds. 0 (or null) in a field means the library's default, or the profile's (JSON: ./dev bench calibrate).</summary>
    public sealed class PlanCluster
    {
        public int Hosts, RanksPerHost;
        public bool Gpus;
        public long DeviceMemoryBytes, HostMemoryBytes;
        public double IntraBandwidth, IntraLatency, InterBandwidth, InterLatency, UpdateBandwidth;
        public string ProfileJson;
    }

    /// <summary>One candidate (shardopt_plan_entry): bytes per rank (the rank holding the most; host memory included in the
    /// kinds), bytes sent per rank and step, the predicted step and its parts (Bubble: pipeline bubble and tensor-parallel
    /// collectives).</summary>
    public sealed class PlanEntry
    {
        public readonly string Name;
        public readonly bool Fits;
        public readonly long ParamsBytes, GradsBytes, OptimizerStateBytes, BufferBytes, DeviceBytes, HostBytes, SentIntraBytes, SentInterBytes;
        public readonly double StepSeconds, ComputeSeconds, ExposedCommSeconds, UpdateSeconds, PostUpdateSeconds, BubbleSeconds;
        internal PlanEntry(shardopt_plan_entry e)
        {
            Name = e.name; Fits = e.fits != 0;
            ParamsBytes = (long)(e.params_bytes + e.host_params_bytes); GradsBytes = (long)(e.grads_bytes + e.host_grads_bytes);
            OptimizerStateBytes = (long)(e.optimizer_state_bytes + e.host_optimizer_state_bytes);
            BufferBytes = (long)(e.buffer_bytes + e.compression_bytes); DeviceBytes = (long)e.device_bytes; HostBytes = (long)e.host_bytes;
            SentIntraBytes = (long)e.sent_intra_bytes; SentInterBytes = (long)e.sent_inter_bytes;
            StepSeconds = e.step_seconds; ComputeSeconds = e.compute_seconds; ExposedCommSeconds = e.exposed_comm_seconds;
            UpdateSeconds = e.update_seconds; PostUpdateSeconds = e.post_update_seconds; BubbleSeconds = e.bubble_seconds + e.tensor_comm_seconds;
        }
        public override string ToString() => $"{Name}{(Fits ? "" : " (does not fit)")}: {StepSeconds} s";
    }

    public static class Planner
    {
        /// <summary>The strategies the library can run on the cluster, those that fit first, fastest first. The model is
        /// `parameters` (a transformer of that many) or, when not null, the layout (float elements); computeSeconds: forward
        /// and backward of one step on one rank. Bad input: ShardoptArgumentException naming it.</summary>
        public static IReadOnlyList<PlanEntry> Plan(double parameters, PlanCluster cluster, double computeSeconds, ParameterLayout layout = null)
        {
            if (cluster == null) throw new ArgumentNullException(nameof(cluster));
            var p = layout?.ToNative(SHARDOPT_F32);
            try
            {
                using (var r = new shardopt_plan_request { struct_size = SHARDOPT_SIZEOF_PLAN_REQUEST })
                using (var c = new shardopt_plan_cluster { struct_size = SHARDOPT_SIZEOF_PLAN_CLUSTER })
                {
                    r.parameters = parameters; r.layout = p; r.compute_seconds = computeSeconds;
                    c.hosts = cluster.Hosts; c.ranks_per_host = cluster.RanksPerHost;
                    c.memory = cluster.Gpus ? SHARDOPT_MEMORY_CUDA : SHARDOPT_MEMORY_HOST;
                    c.device_memory_bytes = (ulong)Math.Max(0, cluster.DeviceMemoryBytes); c.host_memory_bytes = (ulong)Math.Max(0, cluster.HostMemoryBytes);
                    c.intra_bandwidth = cluster.IntraBandwidth; c.intra_latency = cluster.IntraLatency;
                    c.inter_bandwidth = cluster.InterBandwidth; c.inter_latency = cluster.InterLatency;
                    c.update_bandwidth = cluster.UpdateBandwidth;
                    if (cluster.ProfileJson != null) c.profile_json = cluster.ProfileJson;
                    shardopt_plan_create(r, c, out SWIGTYPE_p_shardopt_plan_s plan);
                    try
                    {
                        shardopt_plan_count(plan, out int count, out int _);
                        var plans = new List<PlanEntry>(count);
                        for (int i = 0; i < count; ++i)
                            using (var e = new shardopt_plan_entry { struct_size = SHARDOPT_SIZEOF_PLAN_ENTRY })
                            {
                                shardopt_plan_entry_get(plan, i, e);
                                plans.Add(new PlanEntry(e));
                            }
                        return plans;
                    }
                    finally { shardopt_plan_destroy(plan); }
                }
            }
            finally { if (p != null) shardopt_params_destroy(p); }
        }

        /// <summary>What world rank `rank` of `worldSize` ranks would hold once it has run a step: the layout (float) under
        /// strategy "ddp", "zero1", "zero2", "fsdp" or "local_sgd", the configuration's options (null: the defaults) and
        /// Adam with its defaults. Equal to that rank's GetMemoryStats().</summary>
        public static MemoryStats RankMemory(ParameterLayout layout, string strategy, int worldSize, int rank, ShardingConfiguration configuration = null)
        {
            if (layout == null) throw new ArgumentNullException(nameof(layout));
            int s = strategy == "ddp" ? SHARDOPT_DDP : strategy == "zero1" ? SHARDOPT_ZERO1 : strategy == "zero2" ? SHARDOPT_ZERO2
                : strategy == "fsdp" ? SHARDOPT_FSDP : strategy == "local_sgd" ? SHARDOPT_LOCAL_SGD
                : throw new ArgumentException($"strategy must be ddp, zero1, zero2, fsdp or local_sgd (got {strategy})", nameof(strategy));
            var p = layout.ToNative(SHARDOPT_F32);
            try
            {
                using (var o = configuration != null ? Pin.Clone(configuration.Native, shardopt_sharding_options.getCPtr, SHARDOPT_SIZEOF_SHARDING_OPTIONS)
                                                     : new shardopt_sharding_options())
                using (var m = new shardopt_memory_stats { struct_size = SHARDOPT_SIZEOF_MEMORY_STATS })
                {
                    if (configuration == null) shardopt_sharding_options_init_preset(o, SHARDOPT_SIZEOF_SHARDING_OPTIONS, SHARDOPT_SHARDING_DEFAULT);
                    o.strategy = s;
                    shardopt_plan_rank_memory(p, null, o, worldSize, rank, m);
                    return new MemoryStats(m);
                }
            }
            finally { shardopt_params_destroy(p); }
        }
    }
}

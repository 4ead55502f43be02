package org.shardopt;

import java.util.ArrayList;
import java.util.List;
import org.shardopt.internal.SWIGTYPE_p_shardopt_params_s;
import org.shardopt.internal.SWIGTYPE_p_shardopt_plan_s;
import org.shardopt.internal.shardopt_memory_space;
import org.shardopt.internal.shardopt_memory_stats;
import org.shardopt.internal.shardopt_native;
import org.shardopt.internal.shardopt_plan_cluster;
import org.shardopt.internal.shardopt_plan_entry;
import org.shardopt.internal.shardopt_plan_request;
import org.shardopt.internal.shardopt_sharding_options;
import org.shardopt.internal.shardopt_sharding_preset;

/** The planner (docs/planning.md): which strategies fit a model on a cluster, fastest first, with their memory and step
 *  time (shardopt_plan_create), and what one rank of a job would hold (shardopt_plan_rank_memory: equal to its
 *  getMemoryStats()). 0 in a Cluster field means the library's default, or the profile's. */
public final class Planner {
    static { NativeLoader.load(); }
    private Planner() {}

    /** hosts x ranksPerHost ranks; gpus: one GPU of deviceMemoryBytes per rank; bandwidths in bytes/s, latencies in s. */
    public static final class Cluster {
        public int hosts, ranksPerHost;
        public boolean gpus;
        public long deviceMemoryBytes, hostMemoryBytes;
        public double intraBandwidth, intraLatency, interBandwidth, interLatency, updateBandwidth;
        public String profileJson; // a cluster profile (./dev bench calibrate), or null
    }

    /** One candidate (shardopt_plan_entry): bytes per rank, bytes sent per step, the predicted step and its parts. */
    public static final class Plan {
        public final String name;
        public final boolean fits;
        public final long paramsBytes, gradsBytes, optimizerStateBytes, bufferBytes, deviceBytes, hostBytes;
        public final long sentIntraBytes, sentInterBytes;
        public final double stepSeconds, computeSeconds, exposedCommSeconds, updateSeconds, postUpdateSeconds, bubbleSeconds;
        Plan(shardopt_plan_entry e) {
            name = e.getName();
            fits = e.getFits() != 0;
            paramsBytes = e.getParams_bytes() + e.getHost_params_bytes();
            gradsBytes = e.getGrads_bytes() + e.getHost_grads_bytes();
            optimizerStateBytes = e.getOptimizer_state_bytes() + e.getHost_optimizer_state_bytes();
            bufferBytes = e.getBuffer_bytes() + e.getCompression_bytes();
            deviceBytes = e.getDevice_bytes();
            hostBytes = e.getHost_bytes();
            sentIntraBytes = e.getSent_intra_bytes();
            sentInterBytes = e.getSent_inter_bytes();
            stepSeconds = e.getStep_seconds();
            computeSeconds = e.getCompute_seconds();
            exposedCommSeconds = e.getExposed_comm_seconds();
            updateSeconds = e.getUpdate_seconds();
            postUpdateSeconds = e.getPost_update_seconds();
            bubbleSeconds = e.getBubble_seconds() + e.getTensor_comm_seconds();
        }
        @Override public String toString() { return name + (fits ? "" : " (does not fit)") + ": " + stepSeconds + " s"; }
    }

    /** The model is `parameters` (a transformer of that many), or layout when not null; computeSeconds: forward + backward
     *  of one step on one rank. Those that fit first, fastest first. */
    public static List<Plan> plan(double parameters, ParameterLayout layout, Cluster cluster, double computeSeconds) {
        if (cluster == null) throw new NullPointerException("cluster");
        SWIGTYPE_p_shardopt_params_s params = layout == null ? null : layout.toNative(layout.getPrecision() == null ? ParameterLayout.Precision.FLOAT32 : layout.getPrecision());
        try {
            shardopt_plan_request r = new shardopt_plan_request();
            r.setParameters(parameters);
            r.setLayout(params);
            r.setCompute_seconds(computeSeconds);
            shardopt_plan_cluster c = new shardopt_plan_cluster();
            c.setHosts(cluster.hosts);
            c.setRanks_per_host(cluster.ranksPerHost);
            c.setMemory(cluster.gpus ? shardopt_memory_space.SHARDOPT_MEMORY_CUDA : shardopt_memory_space.SHARDOPT_MEMORY_HOST);
            c.setDevice_memory_bytes(cluster.deviceMemoryBytes);
            c.setHost_memory_bytes(cluster.hostMemoryBytes);
            c.setIntra_bandwidth(cluster.intraBandwidth);
            c.setIntra_latency(cluster.intraLatency);
            c.setInter_bandwidth(cluster.interBandwidth);
            c.setInter_latency(cluster.interLatency);
            c.setUpdate_bandwidth(cluster.updateBandwidth);
            c.setProfile_json(cluster.profileJson);
            SWIGTYPE_p_shardopt_plan_s plan = shardopt_native.shardopt_plan_create(r, c);
            try {
                long n = shardopt_native.shardopt_plan_count(plan)[0];
                List<Plan> plans = new ArrayList<>();
                for (int i = 0; i < n; ++i) {
                    shardopt_plan_entry e = new shardopt_plan_entry();
                    shardopt_native.shardopt_plan_entry_get(plan, i, e);
                    plans.add(new Plan(e));
                }
                return plans;
            } finally {
                shardopt_native.shardopt_plan_destroy(plan);
            }
        } finally {
            if (params != null) shardopt_native.shardopt_params_destroy(params);
        }
    }

    /** What world rank `rank` of `worldSize` ranks would hold once it has run a step, for the layout under strategy
     *  "ddp", "zero1", "zero2", "fsdp" or "local_sgd" with Adam and the library's defaults: equal to that rank's
     *  getMemoryStats(). */
    public static MemoryStats rankMemory(ParameterLayout layout, String strategy, int worldSize, int rank) {
        String[] names = {"ddp", "zero1", "zero2", "fsdp", "hybrid", "local_sgd"};
        int s = java.util.Arrays.asList(names).indexOf(strategy);
        if (s < 0 || s == 4) throw new IllegalArgumentException("strategy must be ddp, zero1, zero2, fsdp or local_sgd (got " + strategy + ")");
        SWIGTYPE_p_shardopt_params_s params = layout.toNative(layout.getPrecision() == null ? ParameterLayout.Precision.FLOAT32 : layout.getPrecision());
        try {
            shardopt_sharding_options o = new shardopt_sharding_options();
            shardopt_native.shardopt_sharding_options_init_preset(o, shardopt_sharding_preset.SHARDOPT_SHARDING_DEFAULT);
            o.setStrategy(s);
            shardopt_memory_stats m = new shardopt_memory_stats();
            shardopt_native.shardopt_plan_rank_memory(params, null, o, worldSize, rank, m);
            return new MemoryStats(m);
        } finally {
            shardopt_native.shardopt_params_destroy(params);
        }
    }
}

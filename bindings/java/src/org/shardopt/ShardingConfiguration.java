package org.shardopt;

import org.shardopt.internal.shardopt_native;
import org.shardopt.internal.shardopt_sharding_options;
import static org.shardopt.internal.shardopt_sharding_preset.*;

/**
 * How a sharded optimizer shards and communicates (AiDotNet's ShardingConfiguration): the library's sharding options, its
 * defaults CreateDefault's (the factories are the library's presets). A setter refuses a bad value at once with the
 * library's message, keeping the old one (also a 0 where the C ABI reads 0 as its default:
 * shardopt_sharding_options_validate_strict). AutoSyncGradients false turns DDP/ZeRO-1 into Local SGD (averaging every
 * LocalSteps steps); EnableGradientCompression compresses every gradient reduction with GradientCompression
 * (docs/compression.md); the CpuOffload flags are ZeRO-Offload's (docs/offload.md; in host memory they change nothing).
 * LearningRate 0 is the wrapped optimizer's; MaxGradNorm 0 no clipping.
 */
public final class ShardingConfiguration<T> {
    static { NativeLoader.load(); }
    private static final int ENABLE = 1, DISABLE = 2; // shardopt_switch
    private final CommunicationBackend<T> backend;
    final shardopt_sharding_options options = new shardopt_sharding_options();
    private ShardingConfiguration(CommunicationBackend<T> backend, int preset) {
        this.backend = java.util.Objects.requireNonNull(backend, "backend");
        shardopt_native.shardopt_sharding_options_init_preset(options, preset);
    }
    public ShardingConfiguration(CommunicationBackend<T> backend) { this(backend, SHARDOPT_SHARDING_DEFAULT); }
    public ShardingConfiguration(CommunicationBackend<T> backend, double learningRate) { this(backend); setLearningRate(learningRate); }
    public static <T> ShardingConfiguration<T> createDefault(CommunicationBackend<T> b) { return new ShardingConfiguration<>(b); }
    public static <T> ShardingConfiguration<T> createForHighBandwidth(CommunicationBackend<T> b) { return new ShardingConfiguration<>(b, SHARDOPT_SHARDING_HIGH_BANDWIDTH); }
    public static <T> ShardingConfiguration<T> createForLowBandwidth(CommunicationBackend<T> b) { return new ShardingConfiguration<>(b, SHARDOPT_SHARDING_LOW_BANDWIDTH); }
    public static <T> ShardingConfiguration<T> createForZeROOffload(CommunicationBackend<T> b) { return new ShardingConfiguration<>(b, SHARDOPT_SHARDING_ZERO_OFFLOAD); }
    public static <T> ShardingConfiguration<T> createForZeROOffloadFull(CommunicationBackend<T> b) { return new ShardingConfiguration<>(b, SHARDOPT_SHARDING_ZERO_OFFLOAD_FULL); }
    private static int flag(boolean v) { return v ? ENABLE : DISABLE; }

    public CommunicationBackend<T> getCommunicationBackend() { return backend; }
    public double getLearningRate() { return options.getLearning_rate(); }
    public void setLearningRate(double v) { options.setLearning_rate(v); }
    public boolean getAutoSyncGradients() { return options.getAuto_sync_gradients() != DISABLE; }
    public void setAutoSyncGradients(boolean v) { options.setAuto_sync_gradients(flag(v)); }
    public int getMinimumParameterGroupSize() { return (int) options.getParameter_group_size(); }
    public void setMinimumParameterGroupSize(int v) { options.setParameter_group_size(v); }
    public boolean getEnableGradientCompression() { return options.getCompression() != GradientCompression.NONE.ordinal(); }
    /** true: createForLowBandwidth's method unless one is chosen; false: NONE. */
    public void setEnableGradientCompression(boolean v) {
        if (!v || !getEnableGradientCompression()) options.setCompression(v ? createForLowBandwidth(backend).options.getCompression() : 0);
    }
    public GradientCompression getGradientCompression() { return GradientCompression.values()[options.getCompression()]; }
    public void setGradientCompression(GradientCompression v) { options.setCompression(v.ordinal()); }
    /** TOP_K: the fraction of each chunk sent. */
    public double getCompressionRatio() { return options.getCompression_ratio(); }
    public void setCompressionRatio(double v) { options.setCompression_ratio(v); }
    /** INT8, INT4, TOP_K, POWER_SGD: keep what compression missed for the next step. */
    public boolean getErrorFeedback() { return options.getError_feedback() != DISABLE; }
    public void setErrorFeedback(boolean v) { options.setError_feedback(flag(v)); }
    public int getPowerSgdRank() { return options.getPower_sgd_rank(); }
    public void setPowerSgdRank(int v) { options.setPower_sgd_rank(v); }
    public int getLocalSteps() { return options.getLocal_sgd_period(); }
    public void setLocalSteps(int v) { options.setLocal_sgd_period(v); }
    public int getGradientAccumulationSteps() { return options.getGradient_accumulation_steps(); }
    public void setGradientAccumulationSteps(int v) { options.setGradient_accumulation_steps(v); }
    public double getMaxGradNorm() { return options.getMax_grad_norm(); }
    public void setMaxGradNorm(double v) { options.setMax_grad_norm(v); }
    /** true: the initial parameters are rank 0's, broadcast at creation (as PyTorch DDP); false: each rank's own. */
    public boolean getBroadcastInitialParameters() { return options.getBroadcast_initial() != DISABLE; }
    public void setBroadcastInitialParameters(boolean v) { options.setBroadcast_initial(flag(v)); }
    public boolean getCpuOffloadOptimizer() { return options.getCpu_offload_optimizer() == ENABLE; }
    public void setCpuOffloadOptimizer(boolean v) { options.setCpu_offload_optimizer(flag(v)); }
    public boolean getCpuOffloadGradients() { return options.getCpu_offload_gradients() == ENABLE; }
    public void setCpuOffloadGradients(boolean v) { options.setCpu_offload_gradients(flag(v)); }
    public boolean getCpuOffloadParams() { return options.getCpu_offload_params() == ENABLE; }
    public void setCpuOffloadParams(boolean v) { options.setCpu_offload_params(flag(v)); }
}

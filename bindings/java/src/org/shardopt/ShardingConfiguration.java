package org.shardopt;

import java.util.Objects;

/**
 * How a sharded optimizer communicates (AiDotNet's ShardingConfiguration).
 * <ul>
 * <li>learningRate: when given, the sharded optimizer steps with it; when absent (NaN; AiDotNet's default is
 *     0.01) the wrapped optimizer's options' learning rate is used, so there is one rate.</li>
 * <li>AutoSyncGradients (true): false turns DDP/ZeRO-1 into Local SGD (no gradient reduction per step,
 *     parameters averaged every LocalSteps steps); sharded strategies reject it.</li>
 * <li>MinimumParameterGroupSize (1024): the gradient bucket (FSDP unit) size in elements.</li>
 * <li>EnableGradientCompression (false): true compresses every gradient reduction (and Local SGD's
 *     averaging) with GradientCompression (INT8 by default); the optimizer's getBytesSent() shows the saving.</li>
 * <li>CompressionRatio (0.1): TOP_K's fraction of each chunk sent, in (0, 1]. ErrorFeedback (true): keep what
 *     compression missed and add it to the next step. PowerSgdRank (4): POWER_SGD's rank, in [1, 1024].</li>
 * <li>CpuOffloadOptimizer, CpuOffloadGradients, CpuOffloadParams (false): ZeRO-Offload (docs/offload.md). They
 *     act on an optimizer in CUDA memory; these optimizers keep their memory in host memory, where the flags are
 *     accepted and change nothing (getMemoryStats() too). createForZeROOffload turns on the first,
 *     createForZeROOffloadFull all three, as in AiDotNet.</li>
 * </ul>
 */
public final class ShardingConfiguration<T> {
    private final CommunicationBackend<T> backend;
    private double learningRate = Double.NaN;
    private boolean autoSyncGradients = true;
    private int minimumParameterGroupSize = 1024;
    private int localSteps = 4;
    private int gradientAccumulationSteps = 1;
    private double maxGradNorm = 0;
    private boolean broadcastInitialParameters = true;
    private boolean enableGradientCompression = false;
    private GradientCompression gradientCompression = GradientCompression.INT8;
    private double compressionRatio = 0.1;
    private boolean errorFeedback = true;
    private int powerSgdRank = 4;
    private boolean cpuOffloadOptimizer = false;
    private boolean cpuOffloadGradients = false;
    private boolean cpuOffloadParams = false;

    public ShardingConfiguration(CommunicationBackend<T> backend) {
        if (backend == null) throw new NullPointerException("backend");
        this.backend = backend;
    }

    public ShardingConfiguration(CommunicationBackend<T> backend, double learningRate) {
        this(backend);
        setLearningRate(learningRate);
    }

    public static <T> ShardingConfiguration<T> createDefault(CommunicationBackend<T> backend) { return new ShardingConfiguration<>(backend); }

    /** Small buckets (512 elements): more, earlier reductions overlapping the backward pass. */
    public static <T> ShardingConfiguration<T> createForHighBandwidth(CommunicationBackend<T> backend) {
        ShardingConfiguration<T> c = new ShardingConfiguration<>(backend);
        c.setMinimumParameterGroupSize(512);
        return c;
    }

    /** Large buckets (4096 elements), fewer messages, and gradient compression on (INT8 with error feedback), as
     *  in AiDotNet. */
    public static <T> ShardingConfiguration<T> createForLowBandwidth(CommunicationBackend<T> backend) {
        ShardingConfiguration<T> c = new ShardingConfiguration<>(backend);
        c.setMinimumParameterGroupSize(4096);
        c.setEnableGradientCompression(true);
        return c;
    }

    /** DeepSpeed's ZeRO-Offload: optimizer state, master weights and the update on the CPU (CpuOffloadOptimizer). */
    public static <T> ShardingConfiguration<T> createForZeROOffload(CommunicationBackend<T> backend) {
        ShardingConfiguration<T> c = new ShardingConfiguration<>(backend);
        c.setCpuOffloadOptimizer(true);
        return c;
    }

    /** ZeRO-Offload of the optimizer, the gradients and (FSDP) the parameter shard. */
    public static <T> ShardingConfiguration<T> createForZeROOffloadFull(CommunicationBackend<T> backend) {
        ShardingConfiguration<T> c = createForZeROOffload(backend);
        c.setCpuOffloadGradients(true);
        c.setCpuOffloadParams(true);
        return c;
    }

    public CommunicationBackend<T> getCommunicationBackend() { return backend; }
    /** The configured learning rate, or NaN when the wrapped optimizer's is used. */
    public double getLearningRate() { return learningRate; }
    public void setLearningRate(double v) {
        if (!(v > 0)) throw new IllegalArgumentException("learningRate must be > 0 (got " + v + ")");
        learningRate = v;
    }
    public boolean getAutoSyncGradients() { return autoSyncGradients; }
    public void setAutoSyncGradients(boolean v) { autoSyncGradients = v; }
    public int getMinimumParameterGroupSize() { return minimumParameterGroupSize; }
    public void setMinimumParameterGroupSize(int v) {
        if (v < 1) throw new IllegalArgumentException("MinimumParameterGroupSize must be >= 1 (got " + v + ")");
        minimumParameterGroupSize = v;
    }
    public boolean getEnableGradientCompression() { return enableGradientCompression; }
    /** true: gradient reductions are compressed with {@link #getGradientCompression()} (INT8 by default). */
    public void setEnableGradientCompression(boolean v) { enableGradientCompression = v; }
    /** The method used when EnableGradientCompression is true. */
    public GradientCompression getGradientCompression() { return gradientCompression; }
    public void setGradientCompression(GradientCompression v) { gradientCompression = Objects.requireNonNull(v, "gradientCompression"); }
    public double getCompressionRatio() { return compressionRatio; }
    /** TOP_K: the fraction of each chunk sent. @throws IllegalArgumentException outside (0, 1] */
    public void setCompressionRatio(double v) { compressionRatio = checkRatio(v); }
    public boolean getErrorFeedback() { return errorFeedback; }
    public void setErrorFeedback(boolean v) { errorFeedback = v; }
    public int getPowerSgdRank() { return powerSgdRank; }
    /** POWER_SGD: the approximation's rank. @throws IllegalArgumentException outside [1, 1024] */
    public void setPowerSgdRank(int v) {
        if (v < 1 || v > 1024) throw new IllegalArgumentException("PowerSgdRank must be in [1, 1024] (got " + v + ")");
        powerSgdRank = v;
    }

    static double checkRatio(double v) {
        if (!(v > 0 && v <= 1)) throw new IllegalArgumentException("CompressionRatio must be in (0, 1] (got " + v + ")");
        return v;
    }
    public int getLocalSteps() { return localSteps; }
    public void setLocalSteps(int v) { localSteps = v; }
    public int getGradientAccumulationSteps() { return gradientAccumulationSteps; }
    public void setGradientAccumulationSteps(int v) { gradientAccumulationSteps = v; }
    /** true (default): the initial parameters are rank 0's, broadcast when the optimizer is created (as PyTorch
     *  DDP does), so replicas cannot start apart; false keeps every rank's own. */
    public boolean getBroadcastInitialParameters() { return broadcastInitialParameters; }
    public void setBroadcastInitialParameters(boolean v) { broadcastInitialParameters = v; }
    public double getMaxGradNorm() { return maxGradNorm; }
    public boolean getCpuOffloadOptimizer() { return cpuOffloadOptimizer; }
    public void setCpuOffloadOptimizer(boolean v) { cpuOffloadOptimizer = v; }
    public boolean getCpuOffloadGradients() { return cpuOffloadGradients; }
    public void setCpuOffloadGradients(boolean v) { cpuOffloadGradients = v; }
    public boolean getCpuOffloadParams() { return cpuOffloadParams; }
    public void setCpuOffloadParams(boolean v) { cpuOffloadParams = v; }
    public void setMaxGradNorm(double v) { maxGradNorm = v; }
}

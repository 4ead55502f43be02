package org.shardopt;

/**
 * How a sharded optimizer communicates (AiDotNet's ShardingConfiguration).
 * <ul>
 * <li>learningRate: when given, the sharded optimizer steps with it; when absent (NaN; AiDotNet's default is
 *     0.01) the wrapped optimizer's options' learning rate is used, so there is one rate.</li>
 * <li>AutoSyncGradients (true): false turns DDP/ZeRO-1 into Local SGD (no gradient reduction per step,
 *     parameters averaged every LocalSteps steps); sharded strategies reject it.</li>
 * <li>MinimumParameterGroupSize (1024): the gradient bucket (FSDP unit) size in elements.</li>
 * <li>EnableGradientCompression (false): not in the C ABI yet; setting true throws
 *     UnsupportedOperationException rather than storing a flag that does nothing.</li>
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

    /** Large buckets (4096 elements): fewer messages (AiDotNet also enables compression, which shardopt lacks). */
    public static <T> ShardingConfiguration<T> createForLowBandwidth(CommunicationBackend<T> backend) {
        ShardingConfiguration<T> c = new ShardingConfiguration<>(backend);
        c.setMinimumParameterGroupSize(4096);
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
    public boolean getEnableGradientCompression() { return false; }
    public void setEnableGradientCompression(boolean v) {
        if (v) throw new UnsupportedOperationException("gradient compression is not in the shardopt C ABI yet; "
                + "use a larger MinimumParameterGroupSize for fewer messages");
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
    public void setMaxGradNorm(double v) { maxGradNorm = v; }
}

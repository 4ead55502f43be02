package org.shardopt;

/** AiDotNet's GradientCompressionOptimizer: DDP with compressed gradient reductions: useSparsification TOP_K at
 *  compressionRatio, else useQuantization INT8, else none (sparsification wins when both are set); the configuration's
 *  ErrorFeedback applies. */
public class GradientCompressionOptimizer<T, TInput, TOutput> extends ShardedOptimizer<T, TInput, TOutput> {
    private final double compressionRatio;
    private final boolean useQuantization, useSparsification;
    public GradientCompressionOptimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config) { this(wrappedOptimizer, config, 0.1); }
    public GradientCompressionOptimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config, double compressionRatio) {
        this(wrappedOptimizer, config, compressionRatio, true, false);
    }
    public GradientCompressionOptimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config, double compressionRatio,
                                        boolean useQuantization, boolean useSparsification) {
        super(wrappedOptimizer, config, s -> {
            s.setStrategy(org.shardopt.internal.shardopt_strategy.SHARDOPT_DDP);
            s.setCompression(method(useQuantization, useSparsification).ordinal());
            s.setCompression_ratio(compressionRatio);
        });
        this.compressionRatio = compressionRatio;
        this.useQuantization = useQuantization;
        this.useSparsification = useSparsification;
    }
    private static GradientCompression method(boolean quantization, boolean sparsification) {
        return sparsification ? GradientCompression.TOP_K : quantization ? GradientCompression.INT8 : GradientCompression.NONE;
    }
    /** The method in use: TOP_K, INT8 or NONE. */
    public GradientCompression getCompression() { return method(useQuantization, useSparsification); }
    public double getCompressionRatio() { return compressionRatio; }
    public boolean getUseQuantization() { return useQuantization; }
    public boolean getUseSparsification() { return useSparsification; }
}

package org.shardopt;

import org.shardopt.internal.shardopt_strategy;

/**
 * AiDotNet's GradientCompressionOptimizer: data parallel (DDP) with compressed gradient reductions. useSparsification:
 * TOP_K at compressionRatio; else useQuantization: INT8; neither: none (sparsification wins when both are set). The
 * configuration's ErrorFeedback applies; these arguments replace its GradientCompression and CompressionRatio.
 */
public class GradientCompressionOptimizer<T, TInput, TOutput> extends ShardedOptimizer<T, TInput, TOutput> {
    private final double compressionRatio;
    private final boolean useQuantization, useSparsification;

    public GradientCompressionOptimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config) {
        this(wrappedOptimizer, config, 0.1, true, false);
    }

    public GradientCompressionOptimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config, double compressionRatio) {
        this(wrappedOptimizer, config, compressionRatio, true, false);
    }

    public GradientCompressionOptimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config,
                                        double compressionRatio, boolean useQuantization, boolean useSparsification) {
        super(wrappedOptimizer, config, s -> {
            s.setStrategy(shardopt_strategy.SHARDOPT_DDP);
            s.setCompression(method(useQuantization, useSparsification).ordinal());
            if (compressionRatio == 0) throw new IllegalArgumentException("compressionRatio must not be 0");
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

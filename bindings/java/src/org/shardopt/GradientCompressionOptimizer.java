package org.shardopt;

import org.shardopt.internal.shardopt_sharding_options;

/**
 * AiDotNet's GradientCompressionOptimizer: data parallel (DDP) with compressed gradient reductions.
 * useSparsification: top-k at compressionRatio (each chunk's largest-magnitude fraction); else useQuantization:
 * int8 (blockwise, a scale per 256 elements); neither: no compression. When both are set, sparsification wins
 * (the ratio only means something for it). The configuration's ErrorFeedback (true) applies; these arguments
 * replace its EnableGradientCompression / GradientCompression.
 */
public class GradientCompressionOptimizer<T, TInput, TOutput> extends ShardedOptimizer<T, TInput, TOutput> {
    private final double compressionRatio;
    private final boolean useQuantization, useSparsification;

    public GradientCompressionOptimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config) {
        this(wrappedOptimizer, config, 0.1, true, false);
    }

    public GradientCompressionOptimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config,
                                        double compressionRatio) {
        this(wrappedOptimizer, config, compressionRatio, true, false);
    }

    /** @throws IllegalArgumentException when compressionRatio is not in (0, 1] */
    public GradientCompressionOptimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config,
                                        double compressionRatio, boolean useQuantization, boolean useSparsification) {
        super(wrappedOptimizer, config, DDP, ShardingConfiguration.checkRatio(compressionRatio));
        this.compressionRatio = compressionRatio;
        this.useQuantization = useQuantization;
        this.useSparsification = useSparsification;
    }

    /** Constructs and initializes (collective). */
    public GradientCompressionOptimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config,
                                        double compressionRatio, boolean useQuantization, boolean useSparsification,
                                        ParameterLayout layout, Object initial) {
        this(wrappedOptimizer, config, compressionRatio, useQuantization, useSparsification);
        initialize(layout, initial);
    }

    /** The method in use: TOP_K, INT8 or NONE. */
    public GradientCompression getCompression() {
        return useSparsification ? GradientCompression.TOP_K : useQuantization ? GradientCompression.INT8 : GradientCompression.NONE;
    }

    public double getCompressionRatio() { return compressionRatio; }
    public boolean getUseQuantization() { return useQuantization; }
    public boolean getUseSparsification() { return useSparsification; }

    @Override
    void configure(shardopt_sharding_options s) {
        // also called by the base constructor's validation, before the fields are set: nothing is created then
        s.setCompression(getCompression().code);
        s.setCompression_ratio(compressionRatio);
    }
}

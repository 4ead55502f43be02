package org.shardopt;

/** Optimizer state and gradients sharded (reduce-scatter per bucket). */
public class ZeRO2Optimizer<T, TInput, TOutput> extends ShardedOptimizer<T, TInput, TOutput> {
    public ZeRO2Optimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config) { super(wrappedOptimizer, config, ZERO2); }

    /** Constructs and initializes (collective). */
    public ZeRO2Optimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config, ParameterLayout layout, Object initial) {
        this(wrappedOptimizer, config);
        initialize(layout, initial);
    }
}

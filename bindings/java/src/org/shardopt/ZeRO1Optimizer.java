package org.shardopt;

/** Optimizer state sharded; gradients all-reduced; parameters all-gathered after the step. */
public class ZeRO1Optimizer<T, TInput, TOutput> extends ShardedOptimizer<T, TInput, TOutput> {
    public ZeRO1Optimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config) { super(wrappedOptimizer, config, ZERO1); }

    /** Constructs and initializes (collective). */
    public ZeRO1Optimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config, ParameterLayout layout, Object initial) {
        this(wrappedOptimizer, config);
        initialize(layout, initial);
    }
}

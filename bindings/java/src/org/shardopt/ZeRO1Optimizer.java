package org.shardopt;

/** Optimizer state sharded; gradients all-reduced; parameters all-gathered after the step. */
public class ZeRO1Optimizer extends ShardedOptimizer {
    public ZeRO1Optimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) { super(wrappedOptimizer, config, ZERO1); }

    /** Constructs and initializes (collective). */
    public ZeRO1Optimizer(Optimizer wrappedOptimizer, ShardingConfiguration config, ParameterLayout layout, Object initial) {
        this(wrappedOptimizer, config);
        initialize(layout, initial);
    }
}

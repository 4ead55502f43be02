package org.shardopt;

/** Optimizer state and gradients sharded (reduce-scatter per bucket). */
public class ZeRO2Optimizer extends ShardedOptimizer {
    public ZeRO2Optimizer(Optimizer wrappedOptimizer, ShardingConfiguration config) { super(wrappedOptimizer, config, ZERO2); }

    /** Constructs and initializes (collective). */
    public ZeRO2Optimizer(Optimizer wrappedOptimizer, ShardingConfiguration config, ParameterLayout layout, Object initial) {
        this(wrappedOptimizer, config);
        initialize(layout, initial);
    }
}

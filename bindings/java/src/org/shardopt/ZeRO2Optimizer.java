package org.shardopt;

import org.shardopt.internal.shardopt_strategy;

/** ZeRO-2: gradients reduce-scattered per bucket (the full gradient is never kept), the optimizer state sharded. */
public class ZeRO2Optimizer<T, TInput, TOutput> extends ShardedOptimizer<T, TInput, TOutput> {
    public ZeRO2Optimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config) {
        super(wrappedOptimizer, config, strategy(shardopt_strategy.SHARDOPT_ZERO2));
    }

    /** Constructs and initializes (collective). */
    public ZeRO2Optimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config, ParameterLayout layout, Object initial) {
        this(wrappedOptimizer, config);
        initialize(layout, initial);
    }
}

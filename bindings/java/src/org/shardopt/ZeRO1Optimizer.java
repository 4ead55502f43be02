package org.shardopt;

import org.shardopt.internal.shardopt_strategy;

/** ZeRO-1: gradients averaged, the optimizer state sharded (each rank updates its shard, then the parameters are gathered). */
public class ZeRO1Optimizer<T, TInput, TOutput> extends ShardedOptimizer<T, TInput, TOutput> {
    public ZeRO1Optimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config) {
        super(wrappedOptimizer, config, strategy(shardopt_strategy.SHARDOPT_ZERO1));
    }

    /** Constructs and initializes (collective). */
    public ZeRO1Optimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config, ParameterLayout layout, Object initial) {
        this(wrappedOptimizer, config);
        initialize(layout, initial);
    }
}

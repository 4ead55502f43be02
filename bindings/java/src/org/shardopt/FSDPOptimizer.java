package org.shardopt;

import org.shardopt.internal.shardopt_strategy;

/** FSDP (ZeRO-3): parameters, gradients and optimizer state sharded at rest; units gathered around their use. */
public class FSDPOptimizer<T, TInput, TOutput> extends ShardedOptimizer<T, TInput, TOutput> {
    public FSDPOptimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config) {
        super(wrappedOptimizer, config, strategy(shardopt_strategy.SHARDOPT_FSDP));
    }

    /** Constructs and initializes (collective). */
    public FSDPOptimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config, ParameterLayout layout, Object initial) {
        this(wrappedOptimizer, config);
        initialize(layout, initial);
    }
}

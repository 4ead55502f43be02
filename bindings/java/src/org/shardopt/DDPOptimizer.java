package org.shardopt;

import org.shardopt.internal.shardopt_strategy;

/** Data parallel (AiDotNet's DDPOptimizer): gradients averaged per bucket, the full update on every rank. */
public class DDPOptimizer<T, TInput, TOutput> extends ShardedOptimizer<T, TInput, TOutput> {
    public DDPOptimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config) {
        super(wrappedOptimizer, config, strategy(shardopt_strategy.SHARDOPT_DDP));
    }

    /** Constructs and initializes (collective). */
    public DDPOptimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config, ParameterLayout layout, Object initial) {
        this(wrappedOptimizer, config);
        initialize(layout, initial);
    }
}

package org.shardopt;

/** Data parallel (AiDotNet's DDPOptimizer): gradients averaged per bucket, the full update on every rank. */
public class DDPOptimizer<T, TInput, TOutput> extends ShardedOptimizer<T, TInput, TOutput> {
    public DDPOptimizer(Optimizer<T, TInput, TOutput> wrapped, ShardingConfiguration<T> config) { super(wrapped, config, strategy(org.shardopt.internal.shardopt_strategy.SHARDOPT_DDP)); }
    /** Constructs and initializes (collective). */
    public DDPOptimizer(Optimizer<T, TInput, TOutput> wrapped, ShardingConfiguration<T> config, ParameterLayout layout, Object initial) { this(wrapped, config); initialize(layout, initial); }
}

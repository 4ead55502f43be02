package org.shardopt;

/** ZeRO-1: gradients averaged, the optimizer state sharded, the parameters gathered after the update. */
public class ZeRO1Optimizer<T, TInput, TOutput> extends ShardedOptimizer<T, TInput, TOutput> {
    public ZeRO1Optimizer(Optimizer<T, TInput, TOutput> wrapped, ShardingConfiguration<T> config) { super(wrapped, config, strategy(org.shardopt.internal.shardopt_strategy.SHARDOPT_ZERO1)); }
    /** Constructs and initializes (collective). */
    public ZeRO1Optimizer(Optimizer<T, TInput, TOutput> wrapped, ShardingConfiguration<T> config, ParameterLayout layout, Object initial) { this(wrapped, config); initialize(layout, initial); }
}

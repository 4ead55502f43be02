package org.shardopt;

/** ZeRO-2: gradients reduce-scattered per bucket, the optimizer state sharded. */
public class ZeRO2Optimizer<T, TInput, TOutput> extends ShardedOptimizer<T, TInput, TOutput> {
    public ZeRO2Optimizer(Optimizer<T, TInput, TOutput> wrapped, ShardingConfiguration<T> config) { super(wrapped, config, strategy(org.shardopt.internal.shardopt_strategy.SHARDOPT_ZERO2)); }
    /** Constructs and initializes (collective). */
    public ZeRO2Optimizer(Optimizer<T, TInput, TOutput> wrapped, ShardingConfiguration<T> config, ParameterLayout layout, Object initial) { this(wrapped, config); initialize(layout, initial); }
}

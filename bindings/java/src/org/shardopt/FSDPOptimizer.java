package org.shardopt;

/** FSDP (ZeRO-3): parameters, gradients and optimizer state sharded at rest; units gathered around their use. */
public class FSDPOptimizer<T, TInput, TOutput> extends ShardedOptimizer<T, TInput, TOutput> {
    public FSDPOptimizer(Optimizer<T, TInput, TOutput> wrapped, ShardingConfiguration<T> config) { super(wrapped, config, strategy(org.shardopt.internal.shardopt_strategy.SHARDOPT_FSDP)); }
    /** Constructs and initializes (collective). */
    public FSDPOptimizer(Optimizer<T, TInput, TOutput> wrapped, ShardingConfiguration<T> config, ParameterLayout layout, Object initial) { this(wrapped, config); initialize(layout, initial); }
}

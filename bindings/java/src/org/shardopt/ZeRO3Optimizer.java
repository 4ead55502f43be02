package org.shardopt;

/** ZeRO-3: FSDPOptimizer under DeepSpeed's name. */
public class ZeRO3Optimizer<T, TInput, TOutput> extends ShardedOptimizer<T, TInput, TOutput> {
    public ZeRO3Optimizer(Optimizer<T, TInput, TOutput> wrapped, ShardingConfiguration<T> config) { super(wrapped, config, strategy(org.shardopt.internal.shardopt_strategy.SHARDOPT_FSDP)); }
    /** Constructs and initializes (collective). */
    public ZeRO3Optimizer(Optimizer<T, TInput, TOutput> wrapped, ShardingConfiguration<T> config, ParameterLayout layout, Object initial) { this(wrapped, config); initialize(layout, initial); }
}

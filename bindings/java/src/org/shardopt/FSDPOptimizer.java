package org.shardopt;

/** Parameters, gradients and state sharded at rest (ZeRO-3). */
public class FSDPOptimizer<T, TInput, TOutput> extends ShardedOptimizer<T, TInput, TOutput> {
    public FSDPOptimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config) { super(wrappedOptimizer, config, FSDP); }

    /** Constructs and initializes (collective). */
    public FSDPOptimizer(Optimizer<T, TInput, TOutput> wrappedOptimizer, ShardingConfiguration<T> config, ParameterLayout layout, Object initial) {
        this(wrappedOptimizer, config);
        initialize(layout, initial);
    }
}
